#!/usr/bin/env python3
"""The operator's files and the metrics exposition, judged by the tools that read them:

1. `promtool check metrics` on the exposition of a server that has served every route kind
   (envelopes, documents, an MCP session and tool call, a stream, a file listing and a signed
   file, errors of every class, a receipt);
2. `promtool check rules` and `promtool test rules` on deploy/prometheus/asof.rules.yml, and
   `promtool check config` on deploy/prometheus/prometheus.yml;
3. `haproxy -c` on deploy/haproxy/haproxy.cfg with the addresses it reads from the
   environment;
4. `systemd-analyze verify` on deploy/systemd/*.service (the installed binary's path swapped
   for the built one; any warning fails);
5. `asof poll --metrics-listen`: its exposition after a round against a local EDGAR stand-in.

Prints 'ops: N passed, N failed'.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "tests", "stream"))
from support import Server, create_key, free_port  # noqa: E402

DEPLOY = os.path.join(REPO, "deploy")


def tool(name):
    found = shutil.which(name)
    if not found and os.environ.get("CI") == "true":
        raise RuntimeError(f"{name} is not installed (scripts/test-all installs it)")
    return found


def run(cmd, **kw):
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return out.returncode, out.stdout + out.stderr


def get(url, key=None, headers=None, method="GET", body=None):
    h = dict(headers or {})
    if key:
        h["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, headers=h, method=method, data=body)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def metrics_address(log_path):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log_path) as f:
            for line in f:
                if "asof metrics on http://" in line:
                    return line.split("asof metrics on http://")[1].split("/")[0]
        time.sleep(0.05)
    raise RuntimeError("no metrics address announced")


def check_exposition(binary, work, promtool):
    db = f"sqlite://{work}/state.db"
    desk = create_key(binary, db, "desk")
    srv = Server(binary, work, extra=["--metrics-listen", "127.0.0.1:0"], db=db)
    failures = []
    try:
        base = srv.base
        news = "/v1/news?ticker=TSLA&as_of=2026-01-01T00:00:00Z"
        calls = [
            ("envelope", base + news, desk, None, None, None),
            ("receipted envelope", base + news, desk, {"X-Service-Audit": "on"}, None, None),
            ("document", base + "/v1/openapi.json", None, None, None, None),
            ("docs page", base + "/docs", None, None, None, None),
            ("live envelope", base + "/v1/keys", desk, None, None, None),
            ("audit log", base + "/v1/audit-log", desk, None, None, None),
            ("sample", base + "/v1/sample/news?as_of=2026-01-01T00:00:00Z", None, None, None, None),
            ("ready", base + "/ready", None, None, None, None),
            ("coverage hole", base + "/v1/news?ticker=TSLA&as_of=2026-01-01T00:00:00Z&visible_by=committed_at", desk, None, None, None),
            ("404", base + "/nothing", None, None, None, None),
            ("405", base + "/health", None, None, "DELETE", None),
            ("401", base + news, None, None, None, None),
            ("400", base + "/v1/news?as_of=yesterday", desk, None, None, None),
            ("site", base + "/", None, None, None, None),
            ("sharing", base + "/delta-sharing/shares", desk, None, None, None),
        ]
        for label, url, key, headers, method, body in calls:
            status, _ = get(url, key, headers, method or "GET", body)
            if status >= 500:
                failures.append(f"{label}: {status}")
        # A file listing and one signed file's bytes.
        status, body = get(base + "/v1/files?source=sec.edgar", desk)
        files = json.loads(body)["results"] if status == 200 else []
        if files:
            get(files[0]["url"])
        else:
            failures.append(f"no file listed ({status})")
        # An MCP session and a tool call.
        mcp_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                       "MCP-Protocol-Version": "2025-06-18", "Authorization": f"Bearer {desk}"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "ops", "version": "1"}}}
        get(base + "/mcp", headers=mcp_headers, method="POST", body=json.dumps(init).encode())
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "svc_query", "arguments": {"ticker": "TSLA", "as_of": "2026-01-01T00:00:00Z"}}}
        get(base + "/mcp", headers=mcp_headers, method="POST", body=json.dumps(call).encode())
        # A stream opened and left.
        req = urllib.request.Request(base + "/v1/stream", headers={"Authorization": f"Bearer {desk}"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                r.read(1)
        except Exception as e:  # noqa: BLE001: only its being opened matters
            failures.append(f"stream: {e}")
        addr = metrics_address(srv.log_path)
        status, text = get(f"http://{addr}/metrics")
        text = text.decode()
        with open(os.path.join(work, "exposition.txt"), "w") as f:
            f.write(text)
        code, out = run([promtool, "check", "metrics"], input=text)
        if code != 0 or out.strip():
            failures.append("promtool check metrics:\n" + out)
        for name in ["asof_http_requests_total", "asof_mcp_sessions_total", "asof_mcp_tool_calls_total",
                     "asof_corpus_info", "asof_audit_receipts_total", "asof_streams_open",
                     "asof_http_request_duration_seconds_bucket", "asof_state_operation_duration_seconds_bucket"]:
            if name not in text:
                failures.append(f"{name} missing from the exposition")
        if desk in text:
            failures.append("a key reached the exposition")
    finally:
        srv.stop()
    return failures


def check_rules(promtool):
    failures = []
    prom = os.path.join(DEPLOY, "prometheus")
    for cmd in (["check", "rules", "asof.rules.yml"], ["test", "rules", "asof.rules.test.yml"],
                ["check", "config", "prometheus.yml"]):
        code, out = run([promtool, *cmd], cwd=prom)
        if code != 0:
            failures.append(f"promtool {' '.join(cmd)}:\n{out}")
    return failures


def check_haproxy(haproxy):
    env = {**os.environ, "ASOF_LB_BIND": "127.0.0.1:1", "ASOF_REPLICA_1": "127.0.0.1:2",
           "ASOF_REPLICA_2": "127.0.0.1:3"}
    code, out = run([haproxy, "-c", "-f", os.path.join(DEPLOY, "haproxy", "haproxy.cfg")], env=env)
    return [] if code == 0 else [out]


def check_systemd(binary, work, analyze):
    failures = []
    units = os.path.join(work, "units")
    os.makedirs(units, exist_ok=True)
    for name in ("asof.service", "asof-poll.service"):
        with open(os.path.join(DEPLOY, "systemd", name)) as f:
            text = f.read()
        if "ExecStart=/usr/local/bin/asof " not in text:
            failures.append(f"{name}: ExecStart is not /usr/local/bin/asof")
        with open(os.path.join(units, name), "w") as f:
            f.write(text.replace("/usr/local/bin/asof", os.path.abspath(binary)))
    code, out = run([analyze, "verify", *(os.path.join(units, n) for n in ("asof.service", "asof-poll.service"))])
    if code != 0 or out.strip():
        failures.append("systemd-analyze verify:\n" + out)
    return failures


def check_poll_metrics(binary, work, promtool):
    from test_stream_client import USER_AGENT, Feed  # the EDGAR stand-in of the stream tests

    feed = Feed()
    corpus = os.path.join(work, "poll-corpus")
    shutil.copytree(os.path.join(REPO, "manifests"), os.path.join(corpus, "manifests"))
    shutil.copytree(os.path.join(REPO, "snapshots"), os.path.join(corpus, "snapshots"),
                    ignore=lambda d, n: ["sources"] if os.path.samefile(d, os.path.join(REPO, "snapshots")) else [])
    port = free_port()
    log = open(os.path.join(work, "poll.log"), "w")
    p = subprocess.Popen([binary, "poll", "--corpus", corpus, "--user-agent", USER_AGENT, "--interval", "1",
                          "--edgar-base-url", feed.base, "--metrics-listen", f"127.0.0.1:{port}"],
                         stdout=log, stderr=subprocess.STDOUT)
    failures = []
    try:
        deadline = time.monotonic() + 60
        text = ""
        while time.monotonic() < deadline:
            try:
                _, body = get(f"http://127.0.0.1:{port}/metrics")
                text = body.decode()
                if "asof_poll_last_success_timestamp_seconds" in text and "asof_poll_rounds_total" in text:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            failures.append("no successful round in the poller's metrics:\n" + text)
        code, out = run([promtool, "check", "metrics"], input=text)
        if code != 0 or out.strip():
            failures.append("promtool check metrics (poll):\n" + out)
    finally:
        p.terminate()
        p.wait(timeout=30)
        log.close()
        feed.stop()
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    promtool, haproxy, analyze = tool("promtool"), tool("haproxy"), tool("systemd-analyze")
    results = {}
    with tempfile.TemporaryDirectory(prefix="asof-ops-") as work:
        checks = [
            ("promtool check metrics on a server that served every route kind", promtool,
             lambda: check_exposition(args.bin, os.path.join(work, "serve"), promtool)),
            ("promtool check/test rules and check config", promtool, lambda: check_rules(promtool)),
            ("haproxy -c on deploy/haproxy/haproxy.cfg", haproxy, lambda: check_haproxy(haproxy)),
            ("systemd-analyze verify on deploy/systemd", analyze,
             lambda: check_systemd(args.bin, work, analyze)),
            ("asof poll --metrics-listen after a round", promtool,
             lambda: check_poll_metrics(args.bin, work, promtool)),
        ]
        for label, needs, check in checks:
            if not needs:
                print(f"skip {label} (tool missing)")
                continue
            os.makedirs(os.path.join(work, "serve"), exist_ok=True)
            try:
                results[label] = check()
            except Exception:
                results[label] = [traceback.format_exc(limit=4)]
    passed = sum(1 for v in results.values() if not v)
    for k, v in results.items():
        print(("ok   " if not v else "FAIL ") + k)
        for line in v:
            print("     " + line.replace("\n", "\n     "))
    print(f"ops: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
