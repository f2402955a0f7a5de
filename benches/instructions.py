#!/usr/bin/env python3
"""Instructions per request of two builds of `asof serve` on one fixed request list (callgrind):
what wall-clock runs on a shared 2-core machine cannot settle (their run-to-run noise is larger
than a 5% difference between builds), counted exactly.

Usage: instructions.py --bin NAME=ASOF [--bin NAME=ASOF ...] --corpus DIR [--cuts N] [--seed S]
                       [--kinds health,by_cik,...] [--out FILE.json]

CORPUS is a directory written by `asof bench-corpus` (the general path's corpus: the certified
lane, and the forward lane when it has one). The seed (fresh unless given, printed) draws one
list of requests that every build is asked in the same order:

- `health`: `GET /health`, the floor every request pays (routing, the middleware stack);
- `by_cik`: keyed first pages of one filer (`/v1/news?cik=&as_of=`), random CIKs and cuts
  (the by-filer hot path);
- `first_page`: keyed all-rows first pages (`/v1/news?as_of=&visible_by=`, limit 100) on each
  clock of each lane;
- `cursor_page`: the next page of each of those (the cursor a first page returned).

`--kinds` asks only some of them (`cursor_page` needs `first_page`): a corpus whose drawn
`committed_at` cut falls in a hole answers 409 there, which fails the run.

Needs valgrind (Debian `valgrind`: `callgrind_control` comes with it). Each build runs under
`valgrind --tool=callgrind` with a fresh SQLite state and its own desk
keys, one per keyed request of the warm-up, taken in turn again by the measured requests (each
key asks two or three times, far below its limit, so no answer is a 429; and, as in the
wall-clock benches, where 512 keys take turns, a measured request finds its key known and its
minute's window open, where a fresh key per request measured a state-store lookup and insert
each time). The list is asked once unmeasured (caches warm, as in the wall-clock benches), then each kind again between `callgrind_control --zero` and
`--dump`: the instructions of every thread of the process while that kind ran, divided by its
requests. Every answer must be 200, and each build's ids must equal the others' (the same
answers, or the comparison would mean nothing).

Prints two Markdown tables, instructions per request of each kind and build and each build's
ratio to the first: of the whole process, and of its connections' tasks alone (hyper's dispatch,
inclusive, read off the dump by `callgrind_annotate`: the requests' own path without what
background tasks, the usage and rate-window flushes, happened to run while they were asked,
which moves the whole-process figure by several percent between runs); writes both to --out as
JSON.
"""
import argparse
import glob
import http.client
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from general_path import free_port, iso, random_cut  # noqa: E402

KINDS = ("health", "by_cik", "first_page", "cursor_page")


def filers_of(corpus, manifest, rng):
    """CIKs that file in the corpus, from a few of its partitions (the bench corpus scatters
    CIK numbers), sorted so the draw depends on the seed alone."""
    import pyarrow.parquet as pq

    parts = sorted(p["path"] for p in manifest["partitions"] if p["source_id"] == "sec.edgar")
    ciks = set()
    for path in rng.sample(parts, min(20, len(parts))):
        ciks.update(c for c in pq.read_table(os.path.join(corpus, path), columns=["cik"]).column("cik").to_pylist() if c)
    return sorted(ciks)


def requests_of(manifest, ciks, rng, cuts):
    """The fixed list: (kind, path) for health and by-CIK pages, and (kind, path) of first pages
    whose cursor pages are asked after them."""
    lanes = {}
    for lane in ("certified_pit", "forward_first_seen"):
        certs = [c for c in manifest["certifications"] if c["source_id"] == "sec.edgar" and c["lane"] == lane]
        if certs:
            lanes[lane] = (min(datetime.fromisoformat(c["from"]) for c in certs).replace(tzinfo=timezone.utc),
                           max(datetime.fromisoformat(c["to"]) for c in certs).replace(tzinfo=timezone.utc))
    first, last = lanes["certified_pit"]
    by_cik = []
    for _ in range(cuts):
        by_cik.append(("by_cik", "/v1/news?" + urllib.parse.urlencode(
            {"cik": rng.choice(ciks), "as_of": iso(random_cut(rng, first, last)), "limit": 100})))
    readings = [("certified_pit", "published_at"), ("certified_pit", "committed_at")]
    if "forward_first_seen" in lanes:
        readings += [("forward_first_seen", "available_at"), ("forward_first_seen", "published_at")]
    first_pages = []
    for lane, clock in readings:
        lf, ll = lanes[lane]
        for _ in range(cuts // len(readings) or 1):
            first_pages.append(("first_page", "/v1/news?" + urllib.parse.urlencode(
                {"as_of": iso(random_cut(rng, lf, ll)), "visible_by": clock, "lane": lane, "limit": 100})))
    health = [("health", "/health")] * cuts
    return health, by_cik, first_pages


class Server:
    def __init__(self, binary, corpus, work, keys_needed):
        self.work = work
        self.db = f"sqlite://{work}/state.db"
        self.keys = []
        for i in range(keys_needed):
            out = subprocess.run([binary, "keys", "create", "--database-url", self.db, "--email",
                                  f"ins{i}@example.com", "--plan", "desk"],
                                 capture_output=True, text=True, check=True).stdout.strip().splitlines()
            self.keys.append(out[-1].strip())
        self.n = 0
        self.port = free_port()
        self.out = os.path.join(work, "callgrind.out")
        self.log = open(os.path.join(work, "serve.log"), "w")
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}", binary, "serve",
             "--corpus", corpus, "--listen", f"127.0.0.1:{self.port}", "--database-url", self.db],
            stdout=self.log, stderr=self.log, cwd=work, env=dict(os.environ, ASOF_LOG="warn"))
        deadline = time.time() + 1200
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit("the server did not start: " + open(os.path.join(work, "serve.log")).read()[-3000:])
            time.sleep(1)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)

    def get(self, path, keyed=True):
        headers = {}
        if keyed:
            headers["Authorization"] = "Bearer " + self.keys[self.n % len(self.keys)]
            self.n += 1
        self.conn.request("GET", path, headers=headers)
        r = self.conn.getresponse()
        body = r.read()
        if r.status != 200:
            sys.exit(f"{path}: {r.status} {body[:300]!r}")
        return body

    def control(self, flag):
        subprocess.run(["callgrind_control", flag, str(self.proc.pid)], check=True,
                       capture_output=True, cwd=self.work)

    def measured(self, f):
        """Instructions of the whole process while `f` runs, and of its connections' tasks
        alone (hyper's dispatch of each connection, inclusive: every request's own path, not
        what background tasks such as the usage flush happened to run in the same seconds)."""
        before = set(glob.glob(self.out + "*"))
        self.control("--zero")
        f()
        self.control("--dump")
        deadline = time.time() + 60
        while True:
            new = set(glob.glob(self.out + "*")) - before
            if new:
                dump = max(new, key=os.path.getmtime)
                text = open(dump).read()
                m = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.M)
                if m:
                    return int(m.group(1)), connections(dump)
            if time.time() > deadline:
                sys.exit("callgrind wrote no dump")
            time.sleep(0.2)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def connections(dump):
    """Inclusive instructions of hyper's per-connection dispatch in a callgrind dump."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", "--auto=no", dump],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"^\s*([\d,]+) .*Dispatcher<D,Bs,I,T>::poll_catch \[", out, re.M)
    if not m:
        sys.exit(f"no connection dispatch in {dump}")
    return int(m.group(1).replace(",", ""))


def ids(body):
    env = json.loads(body)
    return [r["id"] for r in env["results"]], env.get("next_cursor")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH, in the order of the table")
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--cuts", type=int, default=40)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated, of " + ", ".join(KINDS))
    ap.add_argument("--out")
    a = ap.parse_args()
    kinds = [k for k in KINDS if k in a.kinds.split(",")]
    if "cursor_page" in kinds and "first_page" not in kinds:
        sys.exit("cursor_page needs first_page")
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"seed {seed}", flush=True)
    corpus = os.path.abspath(a.corpus)
    with open(os.path.join(corpus, "manifests", "CURRENT")) as f:
        version = f.read().strip()
    with open(os.path.join(corpus, "manifests", version.split(":", 1)[1] + ".json")) as f:
        manifest = json.load(f)
    rng = random.Random(seed)
    health, by_cik, first_pages = requests_of(manifest, filers_of(corpus, manifest, rng), rng, a.cuts)
    health, by_cik = [h for h in health if "health" in kinds], [b for b in by_cik if "by_cik" in kinds]
    first_pages = [f for f in first_pages if "first_page" in kinds]
    results, answers = {}, {}
    for spec in a.bin:
        name, binary = spec.split("=", 1)
        work = tempfile.mkdtemp(prefix=f"ins-{name}-")
        # A key for every keyed request of the warm-up, taken in turn again by the measured
        # ones (the module's comment says why).
        server = Server(binary, corpus, work, max(1, len(by_cik) + len(first_pages)))
        try:
            got = {}

            def ask(kind, paths, keyed=True):
                """Each path once; the ids (and cursor) of each answer kept under `kind`."""
                for p in paths:
                    got.setdefault(kind, []).append(ids(server.get(p, keyed)))

            # Warm: every cache the answers use filled once, nothing kept.
            for _, p in health:
                server.get(p, keyed=False)
            counts = {}
            # `/health` before any keyed request: the state store's flush of the keyed requests'
            # usage, a background task, would otherwise run while it is measured.
            if health:
                counts["health"] = server.measured(lambda: [server.get(p, keyed=False) for _, p in health])
            for _, p in by_cik + first_pages:
                server.get(p)
            if by_cik:
                counts["by_cik"] = server.measured(lambda: ask("by_cik", [p for _, p in by_cik]))
            nexts = []
            if first_pages:
                counts["first_page"] = server.measured(lambda: ask("first_page", [p for _, p in first_pages]))
                # The next page of each measured first page: a cursor page repeats its query's
                # parameters (the contract refuses a cursor of another query).
                nexts = [p + "&" + urllib.parse.urlencode({"cursor": c})
                         for (_, p), (_, c) in zip(first_pages, got["first_page"]) if c]
            if "cursor_page" in kinds:
                counts["cursor_page"] = server.measured(lambda: ask("cursor_page", nexts))
            n = {"health": len(health), "by_cik": len(by_cik), "first_page": len(first_pages), "cursor_page": len(nexts)}
            results[name] = {k: {"instructions": counts[k][0], "requests": n[k], "per_request": counts[k][0] / n[k],
                                 "connections_per_request": counts[k][1] / n[k]} for k in kinds}
            # Cursors are HMAC tokens of each server's own secret: compare ids, not cursors.
            answers[name] = {k: [i for i, _ in v] for k, v in got.items()}
            print(name, {k: (round(v["per_request"]), round(v["connections_per_request"]))
                         for k, v in results[name].items()}, flush=True)
        finally:
            server.stop()
    names = [s.split("=", 1)[0] for s in a.bin]
    equal = all(answers[n] == answers[names[0]] for n in names)
    print(f"\nids equal across builds: {equal}\n")
    print("| kind | requests | " + " | ".join(f"{n} (instructions/request)" for n in names) + " | "
          + " | ".join(f"{n} / {names[0]}" for n in names[1:]) + " |")
    print("|---" * (2 + 2 * len(names) - 1) + "|")
    for k in kinds:
        base = results[names[0]][k]["per_request"]
        print(f"| {k} | {results[names[0]][k]['requests']} | "
              + " | ".join(f"{results[n][k]['per_request']:,.0f}" for n in names) + " | "
              + " | ".join(f"{results[n][k]['per_request'] / base:.3f}" for n in names[1:]) + " |")
    print("\nThe connections' own work (hyper's dispatch, inclusive; background tasks left out):\n")
    print("| kind | " + " | ".join(f"{n}" for n in names) + " | "
          + " | ".join(f"{n} / {names[0]}" for n in names[1:]) + " |")
    print("|---" * (1 + 2 * len(names) - 1) + "|")
    for k in kinds:
        base = results[names[0]][k]["connections_per_request"]
        print(f"| {k} | " + " | ".join(f"{results[n][k]['connections_per_request']:,.0f}" for n in names) + " | "
              + " | ".join(f"{results[n][k]['connections_per_request'] / base:.3f}" for n in names[1:]) + " |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"seed": seed, "corpus": corpus, "version": version, "results": results,
                       "ids_equal": equal}, f, indent=1)
    if not equal:
        sys.exit("the builds answered differently")


if __name__ == "__main__":
    main()
