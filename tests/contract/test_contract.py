#!/usr/bin/env python3
"""Contract checks of the real binary against its own OpenAPI description.

1. openapi-spec-validator validates the served description (OpenAPI 3.1).
2. schemathesis runs every operation (GET routes and POST /mcp; not the never-ending
   /v1/stream, which tests/stream/ checks) with a Desk key and the response checks on (server
   errors, status code, content type, response schema, response headers): 0 failures.
2b. /v1/openapi.yaml, loaded with PyYAML (a YAML 1.1 reader), equals /v1/openapi.json.
3. Headless Chromium (Debian `chromium`) loads /docs with background networking off and must
   show every route of the description; a screenshot is saved under the output directory.

The server runs on a free loopback port over the shipped sample corpus with a fresh SQLite
state store, with every sign-in way configured against real servers on loopback (aiosmtpd for
mail, npm's oauth2-mock-server for providers A and B) and billing configured against the
Stripe-shaped fake processor of test-support, so the sign-in and billing routes answer as in
production rather than `503 sign_in_not_configured` / `billing_not_configured`; readiness is /health answering, never a
fixed sleep. Prints 'N passed, N failed'.
"""

import argparse
import json
import os
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

# The response checks the issue names; schemathesis' data-acceptance checks are not about
# responses and stay off.
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
        "response_headers_conformance",
    ]
)


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


def check_schemathesis(server, key, out_dir, max_examples):
    # The module, not the `st` console script: the interpreter running this file is the
    # venv's, so there is no second path to go stale.
    cmd = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        server.base + "/v1/openapi.json",
        "--checks",
        CHECKS,
        "--header",
        f"Authorization: Bearer {key}",
        "--max-examples",
        str(max_examples),
        # Desk keys get 1,200 requests a minute; stay under so answers are not all 429.
        "--rate-limit",
        "1000/m",
        "--seed",
        "20261122",
        "--workers",
        "1",
        "--report",
        "junit",
        "--report-dir",
        out_dir,
        "--warnings",
        "off",
        # An open event stream never ends, and schemathesis reads a whole body: /v1/stream is
        # checked by its own tests (server/tests/stream.rs, tests/stream/ with httpx-sse).
        "--exclude-path",
        "/v1/stream",
        # This server has no market-data vendor configured, where the connector answers its
        # documented 503 connector_not_configured, which schemathesis counts as a server error
        # once a generated call passes the key and body checks. The connector is checked
        # against a vendor stand-in by server/tests/connector.rs.
        "--exclude-path",
        "/v1/connectors/{vendor}/bars",
    ]
    print("$", " ".join(c if not c.startswith("Authorization") else "Authorization: Bearer ***" for c in cmd), flush=True)
    r = subprocess.run(cmd)
    assert r.returncode == 0, f"schemathesis exited with {r.returncode}"


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
    ap.add_argument("--max-examples", type=int, default=25)
    ap.add_argument("--node", default="node")
    ap.add_argument("--oauth2-mock-server", required=True, help="path of the package's dist/index.mjs")
    ap.add_argument("--fake-processor", required=True, help="the asof-fake-processor binary")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    passed, failed = 0, 0
    with tempfile.TemporaryDirectory(prefix="asof-contract-") as work:
        provider = Provider(args.node, args.oauth2_mock_server, work, "contract@example.com")
        smtp = Controller(Inbox(), hostname="127.0.0.1", port=free_port())
        smtp.start()
        processor = FakeProcessor(args.fake_processor)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        # The fuzzer sends thousands of public requests from one address.
        server = Server(
            args.bin, work, port=port,
            extra=[
                "--public-rate-limit", "1000000",
                "--public-url", base,
                "--smtp-url", f"smtp://127.0.0.1:{smtp.port}",
                "--mail-from", "asof <no-reply@asof.test>",
                "--provider-a-issuer", provider.issuer, "--provider-a-client-id", "contract-a",
                "--provider-b-issuer", provider.issuer, "--provider-b-client-id", "contract-b",
                "--billing-api-url", processor.url,
                "--billing-secret-key", "sk_test_asof_fake_4eC39HqLyjWDarjtT1zdp7dc",
                "--billing-webhook-secret", "whsec_asof_fake_5f1d2c3b4a69788796a5b4c3d2e1f0",
                "--billing-price-researcher", "price_1ResearcherMonthly",
                "--billing-price-power", "price_1PowerMonthly",
                "--billing-price-desk", "price_1DeskMonthly",
            ],
        )
        try:
            key = create_key(args.bin, server.db, "desk")
            doc = None
            steps = [
                ("openapi_spec_validator_accepts_the_description", lambda: check_validator(server)),
                ("yaml_description_read_by_a_yaml_1_1_reader_equals_the_json_one", lambda: check_yaml_loads_as_the_json(server)),
                ("schemathesis_finds_no_failure_on_any_operation", lambda: check_schemathesis(server, key, args.out, args.max_examples)),
                ("chromium_renders_docs_with_every_route", lambda: check_docs_in_chromium(server, doc, args.out)),
            ]
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
        finally:
            server.stop()
            smtp.stop()
            provider.stop()
            processor.stop()
            shutil.copy(server.log_path, os.path.join(args.out, "server.log"))
    print(f"contract: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
