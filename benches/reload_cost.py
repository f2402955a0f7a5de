#!/usr/bin/env python3
"""What versions changing under a replica cost it, counted in instructions (callgrind), not
seconds: a count is repeatable on this shared machine, whose speed drifts by half within an
hour (BENCHMARKS.md, "Load during reloads"), so publishing and not publishing can be compared
apart from whatever else the machine is doing.

One release `asof serve` under `valgrind --tool=callgrind` over a local copy of the shipped
sample (its own SQLite state, `--reload-interval 0.5`), sent the keyed first pages of
benches/reload_load.py one request at a time, round robin over the paths and KEYS desk keys.
After a warm-up, three phases of REQUESTS requests each, every one between two callgrind
dumps (a dump holds the instructions since the previous one):

  idle:       nothing published;
  publishing: a version published every EVERY requests (`asof ingest` of a two-filing daily
              index of the next day, as the poller's publishes are), each waited for until the
              replica answers with it, so every run sees the same number of reloads;
  idle again: nothing published (the first idle phase repeated: how far two equal phases
              differ is the measure's own noise).

Prints one JSON object: instructions per request of each phase, per reload (the publishing
phase's excess over the mean idle phase, divided by its reloads), and the excess as a
fraction of the idle cost.

Usage: benches/reload_cost.py --bin target/release/asof [--requests 2000] [--every 200]
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from support import create_key, free_port  # noqa: E402

PATHS = [
    "/v1/news?cik=789019&as_of=2026-02-05T00:00:00Z&limit=100",
    "/v1/news?cik=1318605&as_of=2026-02-01T00:00:00Z&limit=100",
    "/v1/news?cik=789019&as_of=2026-01-29T00:00:00Z&limit=10",
    "/v1/news?ticker=TSLA&as_of=2026-01-30T00:00:00Z&limit=100",
]

INDEX_HEADER = """Description:           Daily Index of EDGAR Dissemination Feed by Company Name
Last Data Received:    {month} {day:2d}, {year}
Comments:              webmaster@sec.gov
Anonymous FTP:         ftp://ftp.sec.gov/edgar/
 
 
 
 
Company Name                                                  Form Type   CIK
      Date Filed  File Name
-------------------------------------------------------------------------------------------------------------------------------------------------
"""


def daily_index(day, n):
    """A daily index of `day` (a datetime.date) listing `n` filings of companies the request
    list never asks for, so the answers stay the same while versions change."""
    text = INDEX_HEADER.format(month=day.strftime("%b"), day=day.day, year=day.year)
    stamp = day.strftime("%Y%m%d")
    for i in range(n):
        cik = 990000000 + i
        acc = f"{cik:010d}-{day.strftime('%y')}-{day.toordinal() % 1000000:06d}"
        text += (f"{'Bench Filer ' + str(i):<62}{'8-K':<12}{cik:<12}{stamp:<12}"
                 f"edgar/data/{cik}/{acc}.txt         \n")
    return text


def get(base, path, key=None):
    req = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {key}"} if key else {})
    with urllib.request.urlopen(req, timeout=600) as r:
        r.read()
        return r.status, r.headers.get("X-Corpus-Version")


def totals(path):
    """The instruction count a callgrind dump file holds."""
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"{path}: no summary line")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--every", type=int, default=200)
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--keep", help="a directory to copy each phase's callgrind dump to "
                    "(for callgrind_annotate)")
    args = ap.parse_args()
    import datetime

    work = tempfile.mkdtemp(prefix="asof-reload-cost-")
    corpus = os.path.join(work, "corpus")
    os.makedirs(corpus)
    for d in ("manifests", "snapshots"):
        shutil.copytree(os.path.join(REPO, d), os.path.join(corpus, d))
    db = f"sqlite://{work}/state.db"
    # The state store's schema, then the keys (a serve would create it too).
    keys = [create_key(args.bin, db, "desk") for _ in range(args.keys)]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    out_prefix = os.path.join(work, "callgrind.out")
    log = open(os.path.join(work, "server.log"), "w")
    env = {**os.environ, "ASOF_LOG": "warn"}
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_prefix}.%p",
         args.bin, "serve", "--listen", f"127.0.0.1:{port}", "--corpus", corpus,
         "--database-url", db, "--reload-interval", "0.5"],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )
    deadline = time.monotonic() + 600
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}; see {log.name}")
        try:
            if get(base, "/health")[0] == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("server not ready after 600 s under valgrind")
        time.sleep(0.5)

    def dump():
        before = set(glob.glob(f"{out_prefix}.{proc.pid}*"))
        subprocess.run(["callgrind_control", "--dump", str(proc.pid)], check=True,
                       capture_output=True)
        while True:
            new = set(glob.glob(f"{out_prefix}.{proc.pid}*")) - before
            if new:
                time.sleep(0.5)  # the file is written whole before the next request
                dumps.append(sorted(new))
                return sum(totals(p) for p in new)
            time.sleep(0.1)

    n = 0
    statuses = {}
    dumps = []

    def request():
        nonlocal n
        status, version = get(base, PATHS[n % len(PATHS)], keys[n % len(keys)])
        statuses[status] = statuses.get(status, 0) + 1
        n += 1
        return version

    day = datetime.date(2026, 3, 1)
    commit = datetime.datetime(2026, 11, 21, 0, 0, 0)

    def publish():
        nonlocal day, commit
        path = os.path.join(work, f"company.{day.strftime('%Y%m%d')}.idx")
        with open(path, "w") as f:
            f.write(daily_index(day, 2))
        out = subprocess.run(
            [args.bin, "ingest", "--corpus", corpus, "--source", "sec.edgar",
             "--commit-time", commit.strftime("%Y-%m-%dT%H:%M:%SZ"), path],
            capture_output=True, text=True, env={**os.environ, "ASOF_LOG": "warn"},
        )
        if out.returncode != 0:
            raise SystemExit(f"ingest failed: {out.stderr}")
        version = out.stdout.strip().splitlines()[-1]
        day += datetime.timedelta(days=1)
        commit += datetime.timedelta(minutes=1)
        # Wait until the replica answers with the new version (its reload done).
        while get(base, "/health")[1] != version:
            time.sleep(0.2)
        return version

    for _ in range(args.warmup):
        request()
    dump()
    phases = {}
    reloads = 0
    for phase in ("idle", "publishing", "idle_again"):
        for i in range(args.requests):
            if phase == "publishing" and i % args.every == 0:
                publish()
                reloads += 1
            request()
        phases[phase] = dump()
    proc.terminate()
    proc.wait(timeout=600)
    log.close()
    idle = (phases["idle"] + phases["idle_again"]) / 2
    excess = phases["publishing"] - idle
    result = {
        "requests_per_phase": args.requests,
        "reloads": reloads,
        "statuses": statuses,
        "instructions": phases,
        "per_request": {k: round(v / args.requests) for k, v in phases.items()},
        "idle_phases_differ": round(abs(phases["idle"] - phases["idle_again"]) / idle, 4),
        "per_reload": round(excess / reloads) if reloads else None,
        "publishing_excess": round(excess / idle, 4),
    }
    print(json.dumps(result))
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        for name, files in zip(("warmup", "idle", "publishing", "idle_again"), dumps):
            for i, f in enumerate(files):
                shutil.copy(f, os.path.join(args.keep, f"{name}.{i}.callgrind"))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
