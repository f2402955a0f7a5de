#!/usr/bin/env python3
"""Pinned corpus versions (issue 62): what retaining and answering 30 daily versions costs one
replica, measured in one run beside the served version alone.

The corpus: the 2M-row bench corpus (`asof bench-corpus`, the flags BENCHMARKS.md names),
then VERSIONS-1 daily publishes on top by `asof ingest` (each a daily index of the next day,
50 filings, certified), as a poller's days are: VERSIONS versions on one chain, every one
retained (the default seven years). One release `asof serve` with
ASOF_VERSION_CACHE_VERSIONS above VERSIONS, its own SQLite state and KEYS desk keys (so no
answer is a 429; every run counts non-2xx and fails on any).

Measured, in this order:
  rss_one:      VmRSS after the served version answered the request list (warm);
  cold_ms:      the first pinned by-CIK page of each older version, one at a time (the load);
  rss_all:      VmRSS with all VERSIONS versions loaded and warm, after the served pages were
                asked again (as rss_one was taken); the ratio to rss_one. rss_after_loads:
                right after the loads, with the allocator still holding their transient
                memory (manifests parsed and checked), reported apart;
  served:       wrk, keyed by-CIK first pages of the served version (p50, requests/s);
  pinned:       the same pages pinned to a random retained version, all warm;
  beside:       the served wrk again while a second wrk (2 connections) asks pinned pages,
                and once while it asks unpinned ones: the served throughput with pinned
                traffic beside it against alone and against the same traffic unpinned;
  paced:        the same with a side load of a known size (a wrk whose 2 connections each
                wait --side-delay-ms after every answer) instead of a second wrk, which
                takes what CPU it can: pinned traffic of a known size beside the served pages.
  chain_learnt_ms: how long the start's background walk of the manifest chain took (the
                server's log): what a pinned request right after a start may wait.

Usage: benches/pinned.py --bin target/release/asof [--work DIR] [--rows 2000000]
       [--versions 30] [--duration 10] [--corpus DIR (an existing bench corpus, copied)]
Prints one JSON object.
"""

import argparse
import datetime as dt
import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "benches"))
from support import free_port  # noqa: E402
from reload_cost import daily_index  # noqa: E402

LUA = """
local paths, keys = {}, {}
for l in io.lines("%(paths)s") do paths[#paths + 1] = l end
for l in io.lines("%(keys)s") do keys[#keys + 1] = l end
math.randomseed(%(seed)d)
request = function()
  return wrk.format("GET", paths[math.random(#paths)],
    {["Authorization"] = "Bearer " .. keys[math.random(#keys)]})
end
%(delay)s
local shown = 0
response = function(status, headers, body)
  if status ~= 200 and shown < 3 then
    shown = shown + 1
    io.write("NOT200 " .. status .. " " .. string.sub(body, 1, 400) .. "\\n")
  end
end
"""


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def get(base, path, key):
    req = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(req, timeout=600) as r:
        body = r.read()
        return r.status, r.headers.get("x-corpus-version"), body


def wrk(base, paths, keys, work, name, duration, conns, seed, delay_ms=None):
    """wrk asking `paths` with random keys. With `delay_ms`, each connection waits that long
    after an answer before its next request (wrk's `delay` hook): a side load of a known
    size, paced by wrk itself (a few percent of a core), not by a client whose own CPU would
    be most of what it costs the served pages."""
    pf = os.path.join(work, f"{name}.paths")
    with open(pf, "w") as f:
        f.write("\n".join(paths) + "\n")
    lua = os.path.join(work, f"{name}.lua")
    delay = f"delay = function() return {delay_ms} end" if delay_ms else ""
    with open(lua, "w") as f:
        f.write(LUA % {"paths": pf, "keys": keys, "seed": seed, "delay": delay})
    return subprocess.Popen(
        ["wrk", "-t1" if conns <= 2 else "-t2", f"-c{conns}", f"-d{duration}s", "--latency", "-s", lua, base],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def summary(proc):
    out = proc.communicate()[0]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p50.group(2)]
    # wrk prints this line only when some answer was not 2xx or 3xx (a 429 would be one).
    if "Non-2xx" in out:
        raise SystemExit(f"non-2xx answers in a load run:\n{out}")
    return {"rps": rps, "p50_ms": round(float(p50.group(1)) * scale, 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work")
    ap.add_argument("--corpus", help="an existing bench corpus to copy (else built)")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--versions", type=int, default=30)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--keys", type=int, default=2048)
    ap.add_argument("--side-delay-ms", type=int, default=2,
                    help="the paced side load: each of its 2 connections waits this long between requests")
    ap.add_argument("--seed", type=int, default=random.randrange(1 << 31))
    a = ap.parse_args()
    print(f"seed {a.seed}", file=sys.stderr, flush=True)
    rng = random.Random(a.seed)
    if not shutil.which("wrk"):
        subprocess.run("apt-get update -qq && apt-get install -y -qq wrk", shell=True, check=True)
    work = a.work or tempfile.mkdtemp(prefix="pinned-")
    corpus = os.path.join(work, "corpus")
    if a.corpus:
        shutil.copytree(a.corpus, corpus)
    elif not os.path.exists(corpus):
        subprocess.run([a.bin, "bench-corpus", "--rows", str(a.rows), "--days", "2000", "--ciks", "100000",
                        "--seed", "1", "--certified-at", "2000-01-01T00:00:00Z", "--forward-days", "2000",
                        "--out", corpus], check=True, stdout=subprocess.DEVNULL)
    manifest = lambda v: json.load(open(os.path.join(corpus, "manifests", v.split(":")[1] + ".json")))  # noqa: E731
    current = open(os.path.join(corpus, "manifests", "CURRENT")).read().strip()
    span = next(s for s in manifest(current)["spans"]
                if s["source_id"] == "sec.edgar" and s["lane"] == "certified_pit")
    last = dt.date.fromisoformat(span["last"])
    cut = f"{last.isoformat()}T23:59:59Z"
    ciks = subprocess.run([a.bin, "sql", "--corpus", corpus, "--format", "csv",
                           f"SELECT DISTINCT cik FROM news WHERE lane = 'certified_pit' AND cik IS NOT NULL LIMIT 400"],
                          check=True, capture_output=True, text=True).stdout.split()[1:]
    # The chain already published (a work directory run before), oldest first.
    chain = [current]
    while manifest(chain[0]).get("parent"):
        chain.insert(0, manifest(chain[0])["parent"])
    base_version = chain[0]
    if len(chain) > 1:
        span = next(s for s in manifest(base_version)["spans"]
                    if s["source_id"] == "sec.edgar" and s["lane"] == "certified_pit")
        last = dt.date.fromisoformat(span["last"])
        cut = f"{last.isoformat()}T23:59:59Z"
    versions = chain
    t0 = time.monotonic()
    while len(versions) < a.versions:
        day = last + dt.timedelta(days=len(versions))
        path = os.path.join(work, f"company.{day.strftime('%Y%m%d')}.idx")
        with open(path, "w") as f:
            f.write(daily_index(day, 50))
        commit = f"{(day + dt.timedelta(days=1)).isoformat()}T06:00:00Z"
        out = subprocess.run([a.bin, "ingest", "--corpus", corpus, "--source", "sec.edgar", "--commit-time", commit,
                              "--certify", day.isoformat(), path], check=True, capture_output=True, text=True).stdout
        versions.append(out.split()[-1])
    publish_s = time.monotonic() - t0

    db = f"sqlite://{work}/state.db"
    keys_file = os.path.join(work, "keys.txt")
    for old in glob.glob(os.path.join(work, "state.db*")):
        os.remove(old)
    # One user a key: a plan caps the live keys of one user.
    keys = [subprocess.run([a.bin, "keys", "create", "--database-url", db, "--email", f"pin{i}@example.com",
                            "--plan", "desk"], check=True, capture_output=True, text=True).stdout.split()[-1]
            for i in range(a.keys)]
    # The load runs' keys; the last two make the warm-up requests, outside every load run's
    # rate windows.
    warm = keys[-2:]
    with open(keys_file, "w") as f:
        f.write("\n".join(keys[:-2]) + "\n")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ, ASOF_LOG="warn,asof_answer::versions=info", ASOF_LOG_FORMAT="json",
               ASOF_VERSION_CACHE_VERSIONS=str(a.versions + 2))
    log_path = os.path.join(work, "serve.log")
    log = open(log_path, "w")
    server = subprocess.Popen([a.bin, "serve", "--corpus", corpus, "--listen", f"127.0.0.1:{port}",
                               "--database-url", db], env=env, stderr=log, stdout=log)
    try:
        for _ in range(600):
            try:
                get(base, "/health", warm[0])
                break
            except OSError:
                time.sleep(0.1)
        paths = [f"/v1/news?cik={c}&as_of={cut}&limit=100" for c in ciks]
        for p in paths:
            status, v, _ = get(base, p, warm[0])
            assert status == 200 and v == versions[-1], (status, v)
        rss_one = rss_kib(server.pid)
        # The chain below the served version is learnt in the background from the start
        # (each older manifest read and hash-checked once); a pinned request before it is
        # learnt waits for it. Its time is reported apart, and the cold loads below are
        # measured after it: each is then one version's load.
        chain_ms = None
        for _ in range(6000):
            for line in open(log_path):
                if "the manifest chain is learnt" in line:
                    event = json.loads(line)
                    chain_ms = event.get("fields", event).get("ms")
            if chain_ms is not None:
                break
            time.sleep(0.01)
        cold = []
        for v in versions[:-1]:
            p = rng.choice(paths) + f"&corpus_version={v}"
            t = time.monotonic()
            status, got, _ = get(base, p, warm[0])
            cold.append((time.monotonic() - t) * 1000)
            assert status == 200 and got == v, (status, got, v)
        rss_loaded = rss_kib(server.pid)
        for v in versions[:-1]:
            for p in rng.sample(paths, 20):
                status, got, _ = get(base, p + f"&corpus_version={v}", warm[1])
                assert status == 200 and got == v
        # As rss_one was taken: after the served pages were asked (the first warm key has
        # 429 requests of its 1,200 this minute spent). Right after 29 loads, the allocator still holds their transient
        # memory (each load parses a 3.5 MB manifest and checks its canonical form): that
        # figure is reported too, as rss_after_loads.
        for p in paths:
            status, _, _ = get(base, p, warm[0])
            assert status == 200
        rss_all = rss_kib(server.pid)
        pinned_paths = [p + f"&corpus_version={v}" for p in paths for v in versions]
        served = summary(wrk(base, paths, keys_file, work, "served", a.duration, 8, a.seed))
        pinned = summary(wrk(base, pinned_paths, keys_file, work, "pinned", a.duration, 8, a.seed))
        alone = summary(wrk(base, paths, keys_file, work, "alone", a.duration, 8, a.seed + 1))
        side = wrk(base, pinned_paths, keys_file, work, "side-pinned", a.duration, 2, a.seed + 2)
        beside_pinned = summary(wrk(base, paths, keys_file, work, "main-p", a.duration, 8, a.seed + 3))
        side_pinned = summary(side)
        side = wrk(base, paths, keys_file, work, "side-unpinned", a.duration, 2, a.seed + 4)
        beside_unpinned = summary(wrk(base, paths, keys_file, work, "main-u", a.duration, 8, a.seed + 5))
        side_unpinned = summary(side)
        # A side load of a known size: wrk on 2 connections, each waiting --side-delay-ms
        # after every answer (about 1,000 req/s at 2 ms), pinned and then unpinned, beside
        # the served wrk.
        paced_runs = {}
        for name, side_paths in (("pinned", pinned_paths), ("unpinned", paths)):
            side = wrk(base, side_paths, keys_file, work, f"paced-{name}", a.duration, 2, a.seed + 6,
                       delay_ms=a.side_delay_ms)
            main_run = summary(wrk(base, paths, keys_file, work, f"main-paced-{name}", a.duration, 8, a.seed + 7))
            paced_runs[name] = {"served": main_run, "side": summary(side)}
        cold.sort()
        print(json.dumps({
            "seed": a.seed, "versions": len(versions), "publish_s": round(publish_s, 1),
            "rss_one_mib": round(rss_one / 1024, 1), "rss_after_loads_mib": round(rss_loaded / 1024, 1),
            "rss_all_mib": round(rss_all / 1024, 1),
            "rss_ratio": round(rss_all / rss_one, 3),
            "chain_learnt_ms": chain_ms,
            "cold_ms": {"p50": round(cold[len(cold) // 2], 1), "max": round(cold[-1], 1)},
            "served": served, "pinned": pinned,
            "pinned_p50_over_served": round(pinned["p50_ms"] / served["p50_ms"], 3),
            "alone": alone,
            "beside_pinned": beside_pinned, "side_pinned": side_pinned,
            "beside_unpinned": beside_unpinned, "side_unpinned": side_unpinned,
            "served_beside_pinned_over_alone": round(beside_pinned["rps"] / alone["rps"], 3),
            "served_beside_pinned_over_beside_unpinned": round(beside_pinned["rps"] / beside_unpinned["rps"], 3),
            "paced": paced_runs,
            "served_beside_paced_pinned_over_alone": round(paced_runs["pinned"]["served"]["rps"] / alone["rps"], 3),
            "served_beside_paced_pinned_over_paced_unpinned": round(
                paced_runs["pinned"]["served"]["rps"] / paced_runs["unpinned"]["served"]["rps"], 3),
        }, indent=1))
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
