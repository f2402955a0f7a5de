#!/usr/bin/env python3
"""The second security round's load figures (issue 63), measured with the real binary on
loopback, each beside a baseline of the same run.

refused credentials (point 1): one `asof serve` on PostgreSQL (a database of its own) with
  `--trusted-proxy 127.0.0.1`, so each wrk request names its client in X-Forwarded-For.
  First the flood alone (every store lookup then is the flood's). Ordinary keyed traffic
  (wrk, KEYS desk accounts, 200 client addresses, by-ticker pages) runs alone, then beside a
  flood of made-up `svc_live_...` keys from one address (a second
  wrk, a new random key per request). Twice: with the refusal limit (the default, 20 a
  minute) and with it effectively off (`--bad-credential-limit 4294967295`, the behaviour
  before the fix: one store lookup per made-up key). Counted: the state store's key lookups
  during the flood (the service's own `asof_state_operation_duration_seconds_count`), the
  flood's answers by status, and the ordinary traffic's throughput, p99 and non-2xx.

connection reserve (point 5): one `asof serve` with `--max-connections CONNS` and
  `--max-streams STREAMS`; STREAMS streams are opened by STREAMS/4 accounts (4 each), then
  as many again are asked for (each must be 429); ordinary keyed traffic (wrk, 32
  connections) is measured alone, then with the streams open. Once more with
  `--max-streams CONNS-1` (no reserve, the behaviour before the fix) and CONNS-1 streams
  open: what ordinary traffic gets then.

Usage: benches/abuse.py --bin target/release/asof [--duration 10] [--keys 512]
Prints one JSON object. Any non-2xx in the ordinary traffic is counted and printed.
"""

import argparse
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from support import free_port  # noqa: E402

PG = os.environ.get("ASOF_BENCH_PG", "postgres://postgres@127.0.0.1:5432")
PATH = "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&limit=5"

ORDINARY = """
local keys = {}
for l in io.lines("%(keys)s") do keys[#keys + 1] = l end
math.randomseed(%(seed)d)
request = function()
  return wrk.format("GET", "%(path)s", {
    ["Authorization"] = "Bearer " .. keys[math.random(#keys)],
    ["X-Forwarded-For"] = "198.51.100." .. math.random(0, 199)})
end
"""

FLOOD = """
math.randomseed(%(seed)d)
request = function()
  local k = string.format("svc_live_%%08x%%08x%%08x%%08x", math.random(0, 0x7fffffff),
    math.random(0, 0x7fffffff), math.random(0, 0x7fffffff), math.random(0, 0x7fffffff))
  return wrk.format("GET", "%(path)s", {["Authorization"] = "Bearer " .. k,
    ["X-Forwarded-For"] = "203.0.113.66"})
end
"""


def wrk(base, lua_text, work, name, duration, conns):
    lua = os.path.join(work, f"{name}.lua")
    with open(lua, "w") as f:
        f.write(lua_text)
    threads = "-t1" if conns <= 2 else "-t2"
    return subprocess.Popen(["wrk", threads, f"-c{conns}", f"-d{duration}s", "--latency", "-s", lua, base],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def summary(proc):
    out = proc.communicate()[0]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    lat = {}
    for q in ("50", "99"):
        m = re.search(rf"\s{q}%\s+([\d.]+)(us|ms|s)", out)
        lat[q] = round(float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)], 3)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    return {"rps": rps, "p50_ms": lat["50"], "p99_ms": lat["99"],
            "non_2xx": int(non2xx.group(1)) if non2xx else 0,
            "socket_errors": errors.group(0) if errors else None}


def scrape(metrics):
    """Store key lookups so far, and error envelopes sent by code (the service's metrics)."""
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r'^asof_state_operation_duration_seconds_count\{operation="key_by_hash"\} (\d+)', text, re.M)
    codes = {}
    for line in text.splitlines():
        if line.startswith("asof_http_errors_total{"):
            code = re.search(r'code="([^"]+)"', line).group(1)
            codes[code] = codes.get(code, 0) + int(float(line.rsplit(" ", 1)[1]))
    return (int(m.group(1)) if m else 0), codes


def start(bin_, db, extra, log):
    port = free_port()
    metrics = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen([bin_, "serve", "--listen", f"127.0.0.1:{port}", "--database-url", db,
                             "--metrics-listen", metrics, *extra],
                            env=dict(os.environ, ASOF_LOG="warn"), stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(base + "/ready", timeout=2) as r:
                if r.status == 200:
                    return proc, base, port, metrics
        except OSError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"asof serve exited: {proc.returncode}")
        time.sleep(0.1)
    raise SystemExit("asof serve never became ready")


def keys(bin_, db, n, prefix, plan="desk"):
    out = []
    for i in range(n):
        r = subprocess.run([bin_, "keys", "create", "--database-url", db, "--email", f"{prefix}{i}@example.com",
                            "--plan", plan], check=True, capture_output=True, text=True)
        out.append(r.stdout.split()[-1])
    return out


def refused_credentials(a, work):
    name = f"asof_abuse_{random.randrange(1 << 30)}"
    subprocess.run(["psql", f"{PG}/postgres", "-qc", f"CREATE DATABASE {name}"], check=True)
    db = f"{PG}/{name}"
    try:
        ordinary_keys = keys(a.bin, db, a.keys, "ordinary")
        keys_file = os.path.join(work, "ordinary.keys")
        with open(keys_file, "w") as f:
            f.write("\n".join(ordinary_keys) + "\n")
        result = {}
        for label, extra in (("limited", []), ("unlimited", ["--bad-credential-limit", "4294967295"])):
            log = open(os.path.join(work, f"serve-{label}.log"), "w")
            proc, base, _, metrics = start(a.bin, db, ["--trusted-proxy", "127.0.0.1", *extra], log)
            try:
                ordinary = ORDINARY % {"keys": keys_file, "seed": a.seed, "path": PATH}
                # Warm every key into the key cache, then the baseline.
                # The flood alone first: every store lookup in it is the flood's.
                alone_before, _ = scrape(metrics)
                flood_alone = summary(wrk(base, FLOOD % {"seed": a.seed + 2, "path": PATH}, work,
                                          f"flood-alone-{label}", a.duration, 2))
                flood_alone["store_key_lookups"] = scrape(metrics)[0] - alone_before
                summary(wrk(base, ordinary, work, "warm", 2, 8))
                # The ordinary traffic's own lookups (each key again when its cache entry is
                # older than the key cache's TTL): the baseline the flood's are counted over.
                base_before, _ = scrape(metrics)
                alone = summary(wrk(base, ordinary, work, f"alone-{label}", a.duration, 8))
                base_after, _ = scrape(metrics)
                before, codes_before = scrape(metrics)
                flood = wrk(base, FLOOD % {"seed": a.seed + 1, "path": PATH}, work, f"flood-{label}",
                            a.duration, 2)
                beside = summary(wrk(base, ordinary, work, f"beside-{label}", a.duration, 8))
                flood = summary(flood)
                after, codes_after = scrape(metrics)
                lookups = after - before
                flood["answers_by_code"] = {c: codes_after[c] - codes_before.get(c, 0) for c in codes_after
                                            if codes_after[c] != codes_before.get(c, 0)}
            finally:
                proc.terminate()
                proc.wait(timeout=60)
            result[label] = {"flood_alone": flood_alone, "ordinary_alone": alone, "ordinary_beside_flood": beside, "flood": flood,
                             "store_key_lookups_ordinary_alone": base_after - base_before,
                             "store_key_lookups_during_flood": lookups,
                             "store_key_lookups_of_the_flood": lookups - (base_after - base_before),
                             "ordinary_beside_over_alone": round(beside["rps"] / alone["rps"], 3)}
        return result
    finally:
        subprocess.run(["psql", f"{PG}/postgres", "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"])


def open_stream(port, key):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET /v1/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n".encode())
    s.settimeout(20)
    got = b""
    while b"asof stream of lane" not in got and b'"error"' not in got:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    return int(got.split()[1]), s


def connection_reserve(a, work):
    db = f"sqlite://{work}/reserve.db"
    accounts = (a.conns + 3) // 4 + 16
    stream_keys = keys(a.bin, db, accounts, "streamer", "researcher")
    ordinary_keys = keys(a.bin, db, a.keys, "reader")
    keys_file = os.path.join(work, "reader.keys")
    with open(keys_file, "w") as f:
        f.write("\n".join(ordinary_keys) + "\n")
    ordinary = ORDINARY % {"keys": keys_file, "seed": a.seed, "path": PATH}
    result = {}
    for label, max_streams in (("reserve", a.streams), ("no_reserve", a.conns - 1)):
        log = open(os.path.join(work, f"serve-reserve-{label}.log"), "w")
        proc, base, port, _ = start(a.bin, db, ["--max-connections", str(a.conns), "--max-streams", str(max_streams),
                                                "--trusted-proxy", "127.0.0.1"], log)
        held, refused = [], 0
        try:
            summary(wrk(base, ordinary, work, "warm-r", 2, 8))
            alone = summary(wrk(base, ordinary, work, f"r-alone-{label}", a.duration, 32))
            for i in range(max_streams):
                status, s = open_stream(port, stream_keys[i // 4])
                assert status == 200, (label, i, status)
                held.append(s)
            # As many again, each from an account with room of its own: the server's cap.
            if label == "reserve":
                for i in range(min(64, max_streams)):
                    status, s = open_stream(port, stream_keys[max_streams // 4 + 1 + i // 4])
                    refused += status == 429
                    s.close()
            beside = summary(wrk(base, ordinary, work, f"r-beside-{label}", a.duration, 32))
        finally:
            for s in held:
                s.close()
            proc.terminate()
            proc.wait(timeout=60)
        result[label] = {"max_connections": a.conns, "max_streams": max_streams, "streams_open": len(held),
                         "more_streams_asked": min(64, max_streams) if label == "reserve" else 0,
                         "more_streams_refused_429": refused,
                         "ordinary_alone": alone, "ordinary_with_streams_open": beside,
                         "with_streams_over_alone": round(beside["rps"] / alone["rps"], 3)}
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--keys", type=int, default=1024)
    ap.add_argument("--conns", type=int, default=256)
    ap.add_argument("--streams", type=int, default=192)
    ap.add_argument("--only", choices=["credentials", "reserve"])
    ap.add_argument("--seed", type=int, default=random.randrange(1 << 31))
    a = ap.parse_args()
    print(f"seed {a.seed}", file=sys.stderr, flush=True)
    if not shutil.which("wrk"):
        subprocess.run("apt-get update -qq && apt-get install -y -qq wrk", shell=True, check=True)
    work = tempfile.mkdtemp(prefix="abuse-")
    out = {"seed": a.seed}
    if a.only in (None, "credentials"):
        out["refused_credentials"] = refused_credentials(a, work)
    if a.only in (None, "reserve"):
        out["connection_reserve"] = connection_reserve(a, work)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
