#!/usr/bin/env python3
"""Contract checks of the real binary against its own OpenAPI description.

1. openapi-spec-validator validates the served description (OpenAPI 3.1).
2. schemathesis runs as a user would: every check (`--checks all`: schema-valid requests are
   accepted, schema-violating ones refused, responses conform, headers, methods, auth), every
   phase (examples, coverage, fuzzing, stateful), 20 examples per operation, a Desk key, on
   two servers:
   - the embedded default (`asof serve` over the shipped sample, nothing configured): every
     operation but those whose contract answer there is `503 *_not_configured` (sign-in,
     the billing processor routes, the connector), which
   - a fully configured server runs instead (every sign-in way against real servers on
     loopback: aiosmtpd, npm's oauth2-mock-server; billing against the Stripe-shaped fake
     processor; both market-data vendors against their stand-ins), on every operation.
   Each runs with 3 fresh random seeds (printed, so a failure can be replayed with --seeds).
   Only the never-ending /v1/stream is left to its own tests (tests/stream/, httpx-sse).
2b. /v1/openapi.yaml, loaded with PyYAML (a YAML 1.1 reader), equals /v1/openapi.json.
3. Headless Chromium (Debian `chromium`) loads /docs with background networking off and must
   show every route of the description; a screenshot is saved under the output directory.

Servers run on free loopback ports with fresh SQLite state stores; readiness is /health
answering, never a fixed sleep. Prints 'N passed, N failed'.
"""

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "tests/accounts"))
from support import FakeProcessor, Server, create_key, free_port, http_get  # noqa: E402
from test_signin import Inbox, Provider  # noqa: E402
from aiosmtpd.controller import Controller  # noqa: E402

# Operations whose contract answer on a server without their settings is
# `503 *_not_configured`: checked on the configured server only.
UNCONFIGURED_503 = r"^/v1/auth/|^/v1/billing/(webhook|checkout|portal)$|^/v1/connectors/"
# The configured server's webhook secret; hooks.py signs generated webhook bodies with it.
WEBHOOK_SECRET = "whsec_asof_fake_5f1d2c3b4a69788796a5b4c3d2e1f0"


def check_validator(server):
    from openapi_spec_validator import validate

    _, body = http_get(server.base + "/v1/openapi.json")
    doc = json.loads(body)
    assert doc["openapi"].startswith("3.1"), doc["openapi"]
    validate(doc)
    return doc


def check_yaml_loads_as_the_json(server):
    import yaml

    _, j = http_get(server.base + "/v1/openapi.json")
    _, y = http_get(server.base + "/v1/openapi.yaml")
    from_yaml = yaml.safe_load(y)
    from_json = json.loads(j)
    if from_yaml != from_json:
        diffs = []

        def walk(a, b, at):
            if len(diffs) > 5:
                return
            if isinstance(a, dict) and isinstance(b, dict):
                for k in set(a) | set(b):
                    walk(a.get(k), b.get(k), f"{at}/{k}")
            elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
                for i, (x, z) in enumerate(zip(a, b)):
                    walk(x, z, f"{at}/{i}")
            elif a != b or type(a) is not type(b):
                diffs.append(f"{at}: yaml {a!r} vs json {b!r}")

        walk(from_yaml, from_json, "")
        raise AssertionError("YAML and JSON descriptions differ: " + "; ".join(diffs))


def schemathesis_cmd(server, key, out_dir, max_examples, seed, exclude_regex=None):
    # The module, not the `st` console script: the interpreter running this file is the
    # venv's, so there is no second path to go stale.
    cmd = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        server.base + "/v1/openapi.json",
        "--checks",
        "all",
        "--header",
        f"Authorization: Bearer {key}",
        "--max-examples",
        str(max_examples),
        # Desk keys get 1,200 requests a minute; stay under so answers are not all 429.
        "--rate-limit",
        "1100/m",
        "--seed",
        str(seed),
        "--workers",
        "1",
        "--report",
        "junit",
        "--report-dir",
        out_dir,
        "--warnings",
        "off",
        # hooks.py drops generated cursors (only the service mints them).
        "--suppress-health-check",
        "filter_too_much",
        # An open event stream never ends, and schemathesis reads a whole body: /v1/stream is
        # checked by its own tests (server/tests/stream.rs, tests/stream/ with httpx-sse).
        "--exclude-path",
        "/v1/stream",
    ]
    if exclude_regex:
        cmd += ["--exclude-path-regex", exclude_regex]
    return cmd


def run_schemathesis(runs):
    """Runs every `(name, cmd, log)` at once (each is bound by its key's rate limit, not by the
    CPU) and gives `(name, error or None)` per run; each run's output is printed whole."""
    procs = []
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "hooks",
        "PYTHONPATH": os.path.dirname(os.path.abspath(__file__)),
        "ASOF_CONTRACT_WEBHOOK_SECRET": WEBHOOK_SECRET,
    }
    for name, cmd, log in runs:
        shown = " ".join(c if not c.startswith("Authorization") else "Authorization: Bearer ***" for c in cmd)
        print(f"$ {shown}", flush=True)
        f = open(log, "w")
        procs.append((name, subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env), f, log))
    results = []
    for name, proc, f, log in procs:
        code = proc.wait()
        f.close()
        with open(log, encoding="utf-8", errors="replace") as out:
            print(f"---- {name} ----\n{out.read()}", flush=True)
        results.append((name, None if code == 0 else f"schemathesis exited with {code}"))
    return results


class FakeVendors:
    """Both market-data vendor stand-ins of test-support (`asof-fake-vendors`)."""

    def __init__(self, binary):
        self.proc = subprocess.Popen([binary], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening "):
            raise RuntimeError(f"fake vendors did not start: {line!r}")
        self.a, self.b = line.split()[1:3]

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("headless Chromium is not installed (Debian package chromium)")


def check_docs_in_chromium(server, doc, out_dir):
    browser = chromium_binary()
    profile = tempfile.mkdtemp(prefix="asof-chromium-")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ]
    try:
        dom = subprocess.run(
            [browser, *flags, "--dump-dom", server.base + "/docs"],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        text = re.sub(r"<[^>]+>", " ", dom)
        text = re.sub(r"\s+", " ", text).replace("&amp;", "&")
        missing = []
        for path, item in doc["paths"].items():
            for method in item:
                if f"{method.upper()} {path}" not in text:
                    missing.append(f"{method.upper()} {path}")
        assert not missing, f"/docs as rendered by Chromium lacks: {missing}"
        shot = os.path.join(out_dir, "docs.png")
        subprocess.run(
            [browser, *flags, "--hide-scrollbars", "--window-size=1280,2000", f"--screenshot={shot}", server.base + "/docs"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        assert os.path.getsize(shot) > 10_000, "screenshot is empty"
        print(f"screenshot of /docs: {shot}")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True, help="directory for reports and the screenshot")
    ap.add_argument("--max-examples", type=int, default=20)
    ap.add_argument("--seeds", help="comma-separated schemathesis seeds (default: 3 fresh random ones)")
    ap.add_argument("--node", default="node")
    ap.add_argument("--oauth2-mock-server", required=True, help="path of the package's dist/index.mjs")
    ap.add_argument("--fake-processor", required=True, help="the asof-fake-processor binary")
    ap.add_argument("--fake-vendors", required=True, help="the asof-fake-vendors binary")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.seeds:
        seeds = [int(x) for x in args.seeds.split(",")]
    else:
        seeds = [random.SystemRandom().randrange(1, 2**31) for _ in range(3)]
    print(f"schemathesis seeds: {','.join(map(str, seeds))} (replay with --seeds)", flush=True)
    passed, failed = 0, 0
    with tempfile.TemporaryDirectory(prefix="asof-contract-") as work:
        provider = Provider(args.node, args.oauth2_mock_server, work, "contract@example.com")
        smtp = Controller(Inbox(), hostname="127.0.0.1", port=free_port())
        smtp.start()
        processor = FakeProcessor(args.fake_processor)
        vendors = FakeVendors(args.fake_vendors)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        os.makedirs(os.path.join(work, "configured"))
        os.makedirs(os.path.join(work, "embedded"))
        # The fuzzer sends thousands of public requests from one address.
        configured = Server(
            args.bin, os.path.join(work, "configured"), port=port,
            extra=[
                "--public-rate-limit", "1000000",
                "--public-url", base,
                "--smtp-url", f"smtp://127.0.0.1:{smtp.port}",
                "--mail-from", "asof <no-reply@asof.test>",
                "--provider-a-issuer", provider.issuer, "--provider-a-client-id", "contract-a",
                "--provider-b-issuer", provider.issuer, "--provider-b-client-id", "contract-b",
                "--billing-api-url", processor.url,
                "--billing-secret-key", "sk_test_asof_fake_4eC39HqLyjWDarjtT1zdp7dc",
                "--billing-webhook-secret", WEBHOOK_SECRET,
                "--billing-price-researcher", "price_1ResearcherMonthly",
                "--billing-price-power", "price_1PowerMonthly",
                "--billing-price-desk", "price_1DeskMonthly",
                "--vendor-a-url", vendors.a,
                "--vendor-b-url", vendors.b,
            ],
        )
        embedded = Server(args.bin, os.path.join(work, "embedded"), extra=["--public-rate-limit", "1000000"])
        try:
            doc = None
            steps = [
                ("openapi_spec_validator_accepts_the_description", lambda: check_validator(configured)),
                ("yaml_description_read_by_a_yaml_1_1_reader_equals_the_json_one", lambda: check_yaml_loads_as_the_json(configured)),
            ]
            runs = []
            for seed in seeds:
                # A key per run: one run's requests never count against another's minute.
                for label, server, exclude in [
                    ("embedded_default", embedded, UNCONFIGURED_503),
                    ("configured_server", configured, None),
                ]:
                    out = os.path.join(args.out, f"{label}-{seed}")
                    os.makedirs(out, exist_ok=True)
                    key = create_key(args.bin, server.db, "desk")
                    runs.append((f"schemathesis_finds_no_failure_on_the_{label}_with_seed_{seed}",
                                 schemathesis_cmd(server, key, out, args.max_examples, seed, exclude),
                                 os.path.join(out, "schemathesis.log")))
            for name, step in steps:
                try:
                    result = step()
                    if name.startswith("openapi_spec"):
                        doc = result
                    print(f"test {name} ... ok", flush=True)
                    passed += 1
                except Exception as e:  # noqa: BLE001 - report every failure by name
                    print(f"test {name} ... FAILED: {e}", flush=True)
                    failed += 1
            for name, error in run_schemathesis(runs):
                print(f"test {name} ... {'ok' if error is None else 'FAILED: ' + error}", flush=True)
                passed, failed = passed + (error is None), failed + (error is not None)
            try:
                check_docs_in_chromium(configured, doc, args.out)
                print("test chromium_renders_docs_with_every_route ... ok", flush=True)
                passed += 1
            except Exception as e:  # noqa: BLE001
                print(f"test chromium_renders_docs_with_every_route ... FAILED: {e}", flush=True)
                failed += 1
        finally:
            for server in (configured, embedded):
                server.stop()
                shutil.copy(server.log_path, os.path.join(args.out, f"server-{server.port}.log"))
            smtp.stop()
            provider.stop()
            processor.stop()
            vendors.stop()
    print(f"contract: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
