#!/usr/bin/env python3
"""The general path over HTTP (issue 42): all-rows pages, cursor pages and diffs of `asof serve`
beside DuckDB over the same partitions in the same run, ids compared; then the by-filer hot
path's throughput and p99 while broad questions run beside it.

Usage: general_path.py --bin ASOF --corpus DIR [--cuts N] [--duck N] [--seed S]
                       [--seconds S] [--keys K] [--out FILE.json]

CORPUS is a directory written by `asof bench-corpus` (certified-lane EDGAR rows; with
--forward-days, the forward lane over its last days too, measured on `available_at` and
`published_at`). The seed is
printed (a fresh one unless --seed is given) so a run can be replayed.

1. Latency, one keep-alive connection, sequential, release binary, fresh SQLite state:
   - `/health` (the floor, same run);
   - all-rows first pages (`/v1/news?as_of=T`, no ticker or CIK) at random cuts inside the
     certified span, on `published_at` and on `committed_at`, limit 100;
   - cursor pages: pages 2..6 of those cuts, and the first and next page of cuts positioned deep
     in the corpus (a 30-day diff window ending at a random instant, then its cursor page);
   - all-rows diffs with windows of 1 hour, 1 day and 30 days;
   - whole walks of one-day diffs in pages of limit=1000 (the sum of the page times).
   DuckDB 1.4.4 answers the same first pages and windows over the same partition files with
   the revision rule written in SQL (`revision_id NOT IN` the superseded revisions, those
   committed by the cut on `committed_at`), in one warm connection; the ids of every compared
   page must be equal.
2. Isolation: wrk (2 threads, 16 connections) on keyed by-CIK first pages, random CIKs and
   cuts, alone, then while a second wrk keeps 3 and then 8 broad questions in flight
   (all-rows pages of limit 1000 on either clock, 30-day diffs of limit 1000, deep cursor
   pages); throughput and p99 of the by-filer load, and what the broad questions got. Every
   request has its own key among K desk keys, so no answer is a 429; non-2xx are counted.

Prints Markdown tables and writes everything to --out as JSON.
"""
import argparse
import http.client
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from datetime import datetime, timedelta, timezone

import duckdb



# wrk's summary as one JSON line, for both wrk scripts (a plain string: no format braces).
LUA_DONE = r'''
done = function(summary, latency, requests)
  io.write(string.format('RESULT {"requests": %d, "rps": %.1f, "p50_ms": %.3f, "p99_ms": %.3f, "max_ms": %.1f, "non_2xx": %d, "socket_errors": %d}\n',
    summary.requests, summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
'''


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, round((len(s) - 1) * p))] if s else float("nan")


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Client:
    """One keep-alive connection; every request carries the next key of the pool."""

    def __init__(self, port, keys):
        self.port = port
        self.keys = keys
        self.n = 0
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def get(self, path, keyed=True):
        headers = {}
        if keyed:
            self.n += 1
            headers["Authorization"] = "Bearer " + self.keys[self.n % len(self.keys)]
        t = time.perf_counter()
        try:
            self.conn.request("GET", path, headers=headers)
            r = self.conn.getresponse()
            body = r.read()
        except (http.client.HTTPException, OSError):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            raise
        ms = (time.perf_counter() - t) * 1000
        return r.status, body, ms


def news_path(base, **params):
    return base + "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--cuts", type=int, default=40)
    ap.add_argument("--duck", type=int, default=8, help="cuts per kind DuckDB answers too")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--keys", type=int, default=3072)
    ap.add_argument("--out", default=None)
    ap.add_argument("--skip-isolation", action="store_true")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"seed {seed}", flush=True)
    rng = random.Random(seed)

    with open(os.path.join(a.corpus, "manifests", "CURRENT")) as f:
        version = f.read().strip()
    with open(os.path.join(a.corpus, "manifests", version.split(":", 1)[1] + ".json")) as f:
        manifest = json.load(f)
    # Each lane the corpus holds: its partition files and certified span.
    lanes = {}
    for lane in ("certified_pit", "forward_first_seen"):
        lp = [p for p in manifest["partitions"] if p["source_id"] == "sec.edgar" and p["lane"] == lane]
        certs = [c for c in manifest["certifications"] if c["source_id"] == "sec.edgar" and c["lane"] == lane]
        if not lp or not certs:
            continue
        lanes[lane] = {
            "files": [os.path.join(a.corpus, p["path"]) for p in lp],
            "rows": sum(p["row_count"] for p in lp),
            "first_day": min(datetime.fromisoformat(c["from"]) for c in certs).replace(tzinfo=timezone.utc),
            "last_day": max(datetime.fromisoformat(c["to"]) for c in certs).replace(tzinfo=timezone.utc),
        }
        print(f"corpus {a.corpus}, {lane}: {lanes[lane]['rows']:,} rows in {len(lp):,} partitions, "
              f"certified {lanes[lane]['first_day'].date()}..{lanes[lane]['last_day'].date()}", flush=True)
    files, rows = lanes["certified_pit"]["files"], lanes["certified_pit"]["rows"]
    first_day, last_day = lanes["certified_pit"]["first_day"], lanes["certified_pit"]["last_day"]
    parts = files

    # Warm: every partition and access file read once into the OS page cache, as on a replica
    # that has served a while (DuckDB is measured warm too); the server's own caches start
    # empty.
    t = time.time()
    warmed = 0
    for sub in ("partitions", "access"):
        for root, _, names in os.walk(os.path.join(a.corpus, "snapshots", sub)):
            for n in names:
                with open(os.path.join(root, n), "rb") as f:
                    while chunk := f.read(1 << 22):
                        warmed += len(chunk)
    print(f"warmed {warmed / 2**30:.1f} GiB of partitions and access files in {time.time() - t:.0f} s", flush=True)
    work = tempfile.mkdtemp()
    db = f"sqlite://{work}/state.db"
    keys = []
    # Keys are made by the CLI a batch at a time (one process each would take minutes).
    for i in range(a.keys):
        out = subprocess.run([a.bin, "keys", "create", "--database-url", db, "--email", f"gp{i}@example.com", "--plan", "desk"],
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()
        keys.append(out[-1].strip())
    port = free_port()
    log = open(os.path.join(work, "serve.log"), "w")
    env = dict(os.environ, ASOF_LOG="warn")
    server = subprocess.Popen([a.bin, "serve", "--corpus", a.corpus, "--listen", f"127.0.0.1:{port}", "--database-url", db],
                              stderr=log, env=env)
    try:
        deadline = time.time() + 300
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.time() > deadline:
                sys.exit("the server did not start: " + open(os.path.join(work, "serve.log")).read())
            time.sleep(0.1)
        results = run(a, rng, port, keys, lanes)
        results["seed"] = seed
        results["corpus"] = {"rows": rows, "partitions": len(parts), "version": version}
        if a.out:
            with open(a.out, "w") as f:
                json.dump(results, f, indent=1)
    finally:
        server.terminate()
        server.wait()


def random_cut(rng, first_day, last_day):
    # Inside the certified span, away from its very start (so a page has rows before it).
    span = (last_day - first_day).total_seconds()
    return first_day + timedelta(seconds=rng.uniform(0.05 * span, span - 86400))


def run(a, rng, port, keys, lanes):
    cl = Client(port, keys)
    lat = {}
    pages = {}  # kind -> list of (path, first ids) for the DuckDB comparison
    errors = []
    # Every timed request in the order sent: (sequence, kind, ms, path), to say where the
    # slowest fell (an outlier on the server's first data request is a cold start).
    sequence = []

    def timed(kind, path, keep=None):
        status, body, ms = cl.get(path)
        sequence.append((len(sequence) + 1, kind, ms, path))
        if status != 200:
            errors.append((kind, path, status, body[:300]))
            return None
        lat.setdefault(kind, []).append(ms)
        env = json.loads(body)
        if keep is not None:
            pages.setdefault(kind, []).append((keep, [r["id"] for r in env["results"]]))
        return env

    for _ in range(200):
        cl.get("/health", keyed=False)
    for _ in range(500):
        _, _, ms = cl.get("/health", keyed=False)
        lat.setdefault("health", []).append(ms)

    # Every clock of each lane: the certified lane on published_at and committed_at, the
    # forward lane (when the corpus holds one) on available_at and published_at.
    readings = [("certified_pit", "published_at"), ("certified_pit", "committed_at")]
    if "forward_first_seen" in lanes:
        readings += [("forward_first_seen", "available_at"), ("forward_first_seen", "published_at")]
    for lane, clock in readings:
        first_day, last_day = lanes[lane]["first_day"], lanes[lane]["last_day"]
        label = clock if lane == "certified_pit" else f"forward lane, {clock}"
        lp = {} if lane == "certified_pit" else {"lane": lane}
        for i in range(a.cuts):
            t = iso(random_cut(rng, first_day, last_day))
            env = timed(f"first page, {label}", news_path("/v1/news", as_of=t, visible_by=clock, limit=100, **lp),
                        keep={"as_of": t, "clock": clock, "lane": lane} if i < a.duck else None)
            n = 0
            while env and env.get("next_cursor") and n < 5:
                env = timed(f"cursor pages 2-6, {label}", news_path("/v1/news", as_of=t, visible_by=clock, limit=100, cursor=env["next_cursor"], **lp))
                n += 1
            # Deep: a 30-day window ending at a random instant, and its next page.
            end = random_cut(rng, first_day + timedelta(days=31), last_day)
            start = end - timedelta(days=30)
            env = timed(f"deep first page (30-day diff), {label}",
                        news_path("/v1/news/diff", as_of_start=iso(start), as_of_end=iso(end), visible_by=clock, limit=100, **lp))
            if env and env.get("next_cursor"):
                timed(f"deep cursor page, {label}", news_path("/v1/news/diff", as_of_start=iso(start), as_of_end=iso(end), visible_by=clock, limit=100, cursor=env["next_cursor"], **lp))
            for wl, width in (("1 hour", timedelta(hours=1)), ("1 day", timedelta(days=1)), ("30 days", timedelta(days=30))):
                end = random_cut(rng, first_day + timedelta(days=31), last_day)
                start = end - width
                timed(f"diff {wl}, {label}",
                      news_path("/v1/news/diff", as_of_start=iso(start), as_of_end=iso(end), visible_by=clock, limit=100, **lp),
                      keep={"start": iso(start), "as_of": iso(end), "clock": clock, "lane": lane} if i < a.duck else None)

    # Whole walks of one-day windows in pages of 1,000.
    walks = []
    first_day, last_day = lanes["certified_pit"]["first_day"], lanes["certified_pit"]["last_day"]
    for i in range(max(3, a.duck // 2)):
        clock = ("published_at", "committed_at")[i % 2]
        end = random_cut(rng, first_day + timedelta(days=31), last_day)
        start = end - timedelta(days=1)
        total, ids, cursor, npages = 0.0, [], None, 0
        while True:
            status, body, ms = cl.get(news_path("/v1/news/diff", as_of_start=iso(start), as_of_end=iso(end), visible_by=clock, limit=1000, cursor=cursor))
            if status != 200:
                errors.append(("walk", "", status, body[:300]))
                break
            env = json.loads(body)
            total += ms
            npages += 1
            ids.extend(r["id"] for r in env["results"])
            cursor = env.get("next_cursor")
            if not cursor:
                break
        walks.append({"clock": clock, "start": iso(start), "as_of": iso(end), "pages": npages, "rows": len(ids), "ms": total, "ids": ids})

    # DuckDB over the same files, the revision rule in SQL.
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    file_lists = {lane: "[" + ",".join("'" + f.replace("'", "''") + "'" for f in v["files"]) + "]" for lane, v in lanes.items()}

    def duck(clock, as_of, start=None, limit=100, lane="certified_pit"):
        file_list = file_lists[lane]
        cond = f"{clock} IS NOT NULL AND {clock} <= $as_of::TIMESTAMPTZ"
        stale = "supersedes IS NOT NULL"
        if clock == "committed_at":
            stale += " AND committed_at <= $as_of::TIMESTAMPTZ"
        if start:
            cond += f" AND {clock} > $start::TIMESTAMPTZ"
        lim = f"LIMIT {limit}" if limit else ""
        sql = (f"SELECT id FROM read_parquet({file_list}) WHERE {cond} AND lane = '{lane}' "
               f"AND revision_id NOT IN (SELECT supersedes FROM read_parquet({file_list}) WHERE {stale}) "
               f"ORDER BY published_at NULLS LAST, id {lim}")
        params = {"as_of": as_of}
        if start:
            params["start"] = start
        t = time.perf_counter()
        got = [r[0] for r in con.execute(sql, params).fetchall()]
        return got, (time.perf_counter() - t) * 1000

    duck("published_at", iso(last_day))  # warm: footers read once, as a warm service has
    duck_lat = {}
    mismatches = []
    for kind, items in pages.items():
        for keep, ids in items:
            got, ms = duck(keep["clock"], keep["as_of"], keep.get("start"), lane=keep["lane"])
            duck_lat.setdefault(kind, []).append(ms)
            if got != ids:
                mismatches.append((kind, keep, ids[:3], got[:3]))
    walk_duck = []
    for w in walks:
        got, ms = duck(w["clock"], w["as_of"], w["start"], limit=None)
        walk_duck.append(ms)
        if got != w["ids"]:
            mismatches.append(("walk", w["start"], len(w["ids"]), len(got)))

    health = statistics.median(lat["health"])
    print(f"\n/health p50 {health:.3f} ms (the floor, same run)\n")
    print("| question | n | p50 ms | p99 ms | max ms | DuckDB p50 ms | × DuckDB |")
    print("|---|---|---|---|---|---|---|")
    table = {}
    for kind in sorted(k for k in lat if k != "health"):
        v = lat[kind]
        d = duck_lat.get(kind)
        dp = statistics.median(d) if d else None
        row = {"n": len(v), "p50": statistics.median(v), "p99": pct(v, 0.99), "max": max(v), "duckdb_p50": dp}
        table[kind] = row
        ratio = f"{dp / row['p50']:.0f}×" if dp else ""
        print(f"| {kind} | {len(v)} | {row['p50']:.2f} | {row['p99']:.2f} | {row['max']:.2f} | {dp:.1f} |" if dp else
              f"| {kind} | {len(v)} | {row['p50']:.2f} | {row['p99']:.2f} | {row['max']:.2f} | | |", end="")
        print(f" {ratio} |" if dp else "")
    print("\n| one-day diff walked in pages of 1,000 | clock | pages | rows | sum of pages ms | DuckDB one query ms | ratio |")
    print("|---|---|---|---|---|---|---|")
    for w, d in zip(walks, walk_duck):
        print(f"| {w['start']} | {w['clock']} | {w['pages']} | {w['rows']:,} | {w['ms']:.1f} | {d:.1f} | {w['ms'] / d:.2f} |")
    print(f"\nids compared with DuckDB: {sum(len(v) for v in pages.values()) + len(walks)} answers, {len(mismatches)} differ")
    for m in mismatches[:5]:
        print("  differs:", m)
    print(f"non-2xx answers: {len(errors)}")
    for e in errors[:5]:
        print("  ", e)
    slowest = sorted(sequence, key=lambda s: -s[2])[:5]
    print(f"\nslowest of the {len(sequence)} timed requests (sequence number in the run, kind, ms):")
    for n, kind, ms, path in slowest:
        print(f"  #{n} {kind}: {ms:.2f} ms  {path}")
    results = {"health_p50": health, "latency": table,
               "slowest": [{"sequence": n, "kind": k, "ms": ms, "path": p} for n, k, ms, p in slowest],
               "walks": [{k: v for k, v in w.items() if k != "ids"} | {"duckdb_ms": d} for w, d in zip(walks, walk_duck)],
               "mismatches": len(mismatches), "non_2xx": len(errors)}
    if not a.skip_isolation:
        results["isolation"] = isolation(a, rng, port, keys, lanes["certified_pit"]["files"], first_day, last_day)
    return results


def isolation(a, rng, port, keys, files, first_day, last_day):
    """wrk on keyed by-CIK pages, alone and beside 3 and 8 broad questioners."""
    con = duckdb.connect()
    sample = [f for i, f in enumerate(files) if i % max(1, len(files) // 40) == 0]
    ciks = [r[0] for r in con.execute("SELECT DISTINCT cik FROM read_parquet($f) LIMIT 4000", {"f": sample}).fetchall()]
    work = tempfile.mkdtemp()
    with open(os.path.join(work, "paths.txt"), "w") as f:
        for _ in range(4000):
            t = iso(random_cut(rng, first_day, last_day))
            f.write(news_path("/v1/news", cik=rng.choice(ciks), as_of=t, limit=100) + "\n")
    # wrk takes five sixths of the keys (enough that no key reaches its 1,200 a minute over the
    # back-to-back runs), the broad questioners the rest.
    wrk_keys, broad_keys = keys[: len(keys) * 5 // 6], keys[len(keys) * 5 // 6:]
    with open(os.path.join(work, "keys.txt"), "w") as f:
        f.write("\n".join(wrk_keys) + "\n")

    def lua_prelude(paths_file, keys_file):
        """Lua that loads a wrk script's paths and keys, one a line."""
        return (f'local paths, keys = {{}}, {{}}\n'
                f'for l in io.lines("{work}/{paths_file}") do paths[#paths + 1] = l end\n'
                f'for l in io.lines("{work}/{keys_file}") do keys[#keys + 1] = l end\n')

    lua = os.path.join(work, "load.lua")
    with open(lua, "w") as f:
        f.write(lua_prelude("paths.txt", "keys.txt") + f'''
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", paths[math.random(#paths)], {{ ["Authorization"] = "Bearer " .. keys[(n % #keys) + 1] }})
end
''' + LUA_DONE)

    def wrk(seconds):
        out = subprocess.run(["wrk", "-t2", "-c16", f"-d{seconds}s", "--latency", "-s", lua, f"http://127.0.0.1:{port}"],
                             capture_output=True, text=True, check=True).stdout
        m = re.search(r"RESULT (\{.*\})", out)
        return json.loads(m.group(1))

    def broad_question(r):
        kind = r.randrange(4)
        clock = r.choice(["published_at", "committed_at"])
        end = random_cut(r, first_day + timedelta(days=31), last_day)
        if kind == 0:
            return news_path("/v1/news", as_of=iso(end), visible_by=clock, limit=1000)
        if kind == 1:
            return news_path("/v1/news/diff", as_of_start=iso(end - timedelta(days=30)), as_of_end=iso(end), visible_by=clock, limit=1000)
        if kind == 2:
            return news_path("/v1/news/diff", as_of_start=iso(end - timedelta(days=1)), as_of_end=iso(end), visible_by=clock, limit=1000)
        return news_path("/v1/news/diff", as_of_start=iso(first_day), as_of_end=iso(end), visible_by=clock, limit=1000)

    # The broad questioners are a second wrk (a thread and a connection per questioner, so
    # each keeps one broad question in flight and its Lua state knows what it asked last): a client in C reads a 1 MB answer for almost
    # no CPU, where Python threads reading them took the 2 cores from the server under test.
    # Each answer's cursor page is asked next on the same connection (deep positions too).
    r = random.Random(rng.random())
    with open(os.path.join(work, "broad.txt"), "w") as f:
        for _ in range(4000):
            f.write(broad_question(r) + "\n")
    with open(os.path.join(work, "broad_keys.txt"), "w") as f:
        f.write("\n".join(broad_keys) + "\n")
    broad_lua = os.path.join(work, "broad.lua")
    with open(broad_lua, "w") as f:
        f.write(lua_prelude("broad.txt", "broad_keys.txt") + f'''
local n, follow, last = 0, {{}}, nil
request = function()
  n = n + 1
  local path = table.remove(follow)
  if path == nil then path = paths[math.random(#paths)] end
  last = path
  return wrk.format("GET", path, {{ ["Authorization"] = "Bearer " .. keys[(n % #keys) + 1] }})
end
response = function(status, headers, body)
  -- Follow the first page's cursor once (a cursor page is not followed again).
  if status == 200 and last ~= nil and not string.find(last, "cursor=", 1, true) then
    local c = string.match(body, '"next_cursor":"([^"]+)"')
    if c then follow[#follow + 1] = last .. "&cursor=" .. c end
  end
end
''' + LUA_DONE)

    wrk(10)  # warm-up: the access index's first reads of its files
    out = {}
    for n in (0, 3, 8):
        broad = None
        if n:
            broad = subprocess.Popen(["wrk", f"-t{n}", f"-c{n}", f"-d{a.seconds + 2}s", "--latency", "--timeout", "30s",
                                      "-s", broad_lua, f"http://127.0.0.1:{port}"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(1)
        res = wrk(a.seconds)
        if broad:
            bout, berr = broad.communicate()
            m = re.search(r"RESULT (\{.*\})", bout)
            if not m:
                sys.exit(f"the broad wrk failed: {bout}{berr}")
            b = json.loads(m.group(1))
            res["broad"] = {"requests": b["requests"], "p50_ms": b["p50_ms"], "p99_ms": b["p99_ms"], "max_ms": b["max_ms"],
                            "non_2xx": b["non_2xx"] + b["socket_errors"]}
        else:
            res["broad"] = {"requests": 0, "p50_ms": None, "p99_ms": None, "max_ms": None, "non_2xx": 0}
        out[str(n)] = res
    base = out["0"]["rps"]
    print("\n| broad questions beside | by-CIK req/s | of unloaded | p50 ms | p99 ms | max ms | non-2xx | broad answered | broad p50 ms | broad max ms | broad non-2xx |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, r in out.items():
        b = r["broad"]
        print(f"| {n} | {r['rps']:.0f} | {100 * r['rps'] / base:.0f}% | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['max_ms']:.1f} | {r['non_2xx'] + r['socket_errors']} | "
              f"{b['requests']} | {(b['p50_ms'] or 0):.1f} | {(b['max_ms'] or 0):.1f} | {b['non_2xx']} |")
    # The floor in the same run.
    with open(os.path.join(work, "paths.txt"), "w") as f:
        f.write("/health\n")
    out["health"] = wrk(a.seconds)
    print(f"\n/health under the same wrk: {out['health']['rps']:.0f} req/s; by-CIK unloaded is {100 * base / out['health']['rps']:.0f}% of it")
    return out


if __name__ == "__main__":
    main()
