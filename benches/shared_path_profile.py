#!/usr/bin/env python3
"""Where the shared request path's time goes (issue 65): a CPU profile of `asof serve` under
wrk, bucketed by layer, beside the bare axum server's own profile of the same load.

For each workload, a server of the `profiling` profile (symbols, line tables) is loaded by
`wrk -t2 -c16` while `perf record -e cpu-clock` (the software clock: hardware counters are
not available on every machine) samples it. The samples' symbols are then put into layers by
name (the first pattern that matches, top to bottom), giving each layer's share of the
server's CPU time:

    kernel (network, scheduling), hyper (HTTP/1 parse and encode), tokio (runtime),
    allocation, our middleware (request ids, context, limits, guard, caching, receipts),
    tower-http (CORS, compression, timeout), tracing, axum routing, serde/JSON, hashing
    (sha2, HMAC), the handler and engine, the rest.

Workloads: `GET /health` on the bare server and on `asof serve`, and a keyed 1-row and a
keyed 100-row by-filer page (`asof serve`, each with enough desk keys of its own that no answer
is a 429; non-2xx are counted and fail the run).

Usage: benches/shared_path_profile.py --bin target/profiling/asof
           --bare target/release/asof-bare-axum [--duration 8] [--keys 512]
Prints a Markdown table per workload and one JSON object.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from support import Server, create_key, free_port  # noqa: E402

LAYERS = [
    ("kernel", r"^\[k\]|kallsyms"),
    ("allocation", r"malloc|free|realloc|mi_|jemalloc|__rust_alloc|__rust_dealloc|alloc::raw_vec|RawVec"),
    ("hyper", r"hyper::|httparse|http::header|http::uri|http_body"),
    ("tokio", r"tokio::|mio::|parking_lot|crossbeam"),
    ("tracing", r"tracing::|tracing_core|tracing_subscriber"),
    ("tower-http", r"tower_http::"),
    ("our middleware", r"asof_server::http::(middleware|observe|limits|guard|caching|receipts|client|response)|asof_server::obs|asof_server::ops"),
    ("axum routing", r"axum::|matchit|tower::"),
    ("serde/JSON", r"serde|json"),
    ("hashing", r"sha2|hmac|Sha256|foldhash|siphash|hash"),
    ("handler and engine", r"asof_server::routes|asof_answer|asof_engine|asof_cursor"),
    ("libc", r"libc|memcpy|memmove|memset|__libc"),
]

WRK_LUA = """
local keys = {}
for l in io.lines("%(keys)s") do keys[#keys + 1] = l end
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "%(path)s", {["Authorization"] = "Bearer " .. keys[(n %% #keys) + 1]})
end
"""


def wrk(url, duration, script=None):
    cmd = ["wrk", "-t2", "-c16", f"-d{duration}s"]
    if script:
        cmd += ["-s", script]
    out = subprocess.run(cmd + [url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non2xx = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", out)) else 0
    return rps, non2xx


def profile(pid, url, duration, work, name, script=None):
    data = os.path.join(work, f"{name}.perf")
    rec = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "-p", str(pid), "-o", data, "--", "sleep", str(duration)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.2)
    rps, non2xx = wrk(url, duration, script)
    rec.wait()
    report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio", "--sort", "dso,sym", "--percent-limit", "0"],
                            capture_output=True, text=True).stdout
    shares = collections.Counter()
    for line in report.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(\S+)\s+(.*)$", line)
        if not m:
            continue
        pct, dso, sym = float(m.group(1)), m.group(2), m.group(3)
        text = f"{dso} {sym}"
        layer = next((n for n, pat in LAYERS if re.search(pat, text)), "the rest")
        shares[layer] += pct
    return {"requests_per_s": rps, "non_2xx": non2xx, "layers": dict(shares.most_common())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="asof built with --profile profiling")
    ap.add_argument("--bare", required=True, help="asof-bare-axum")
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("--keys", type=int, default=512, help="desk keys per keyed workload")
    args = ap.parse_args()
    out = {}
    with tempfile.TemporaryDirectory(prefix="asof-shared-path-") as work:
        port = free_port()
        bare = subprocess.Popen([args.bare, "--listen", f"127.0.0.1:{port}"], stdout=subprocess.PIPE, text=True)
        assert bare.stdout.readline().startswith("listening")
        try:
            out["bare /health"] = profile(bare.pid, f"http://127.0.0.1:{port}/health", args.duration, work, "bare")
        finally:
            bare.terminate()
        server = Server(args.bin, work, env={"ASOF_LOG": "warn"})
        try:
            out["asof /health"] = profile(server.proc.pid, f"{server.base}/health", args.duration, work, "health")
            for name, path in [
                ("keyed 1-row page", "/v1/news?ticker=MSFT&as_of=2026-02-06T00:00:00Z&limit=1"),
                ("keyed 100-row page", "/v1/news?ticker=MSFT&as_of=2026-02-06T00:00:00Z&limit=100"),
            ]:
                # Keys of its own for each keyed workload: the runs follow each other within
                # a minute, and keys the last run spent would answer this one 429.
                keys = os.path.join(work, f"{len(out)}.keys")
                with open(keys, "w") as f:
                    for _ in range(args.keys):
                        f.write(create_key(args.bin, server.db, "desk") + "\n")
                script = os.path.join(work, f"{len(out)}.lua")
                with open(script, "w") as f:
                    f.write(WRK_LUA % {"keys": keys, "path": path})
                out[name] = profile(server.proc.pid, server.base, args.duration, work, name.replace(" ", "-"), script)
        finally:
            server.stop()
    layers = [n for n, _ in LAYERS] + ["the rest"]
    names = list(out)
    print("| layer | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    print("| requests/s | " + " | ".join(f"{out[n]['requests_per_s']:,.0f}" for n in names) + " |")
    for layer in layers:
        print(f"| {layer} | " + " | ".join(f"{out[n]['layers'].get(layer, 0):.1f}%" for n in names) + " |")
    print(json.dumps(out))
    bad = {n: o["non_2xx"] for n, o in out.items() if o["non_2xx"]}
    if bad:
        print(f"non-2xx answers: {bad}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
