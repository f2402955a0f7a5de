#!/usr/bin/env python3
"""Cold by-filer pages from object storage (issue 47): `asof serve` on a corpus in s3s-fs
(loopback, SigV4) behind a proxy that adds a fixed delay to every request (an S3 first-byte
time) and records what the replica asks for.

Usage: cold_pages.py --bin ASOF --corpus DIR --s3s-fs S3S_FS [--delay-ms 20] [--pages 200]
                     [--seed S] [--out FILE.json]

CORPUS is a directory written by `asof bench-corpus`; it is hard-linked into the bucket's
folder (copied when it cannot be). The seed is printed (a fresh one unless --seed is given).

Measured, one request at a time so every object-store request is the page's own:
1. Start: from spawning the server to its first `/health` 200, on the bucket through the
   proxy, and on the local directory; the requests and bytes the start from the bucket took.
2. Cold pages: PAGES random filers with at least one row, and PAGES/4 filers with 400 rows or
   more,, each asked once (`/v1/news?cik=C&
   as_of=T&limit=100`, T a random cut inside the certified span), then the page after it by
   its cursor when there is one: latency, range GETs and bytes fetched per page.
   Also all-rows first pages (`/v1/news?as_of=T&limit=100`, the partition walk) at 20 of
   those cuts, cold, for what the walk asks the bucket for.
3. The same first pages once more (warm: from the replica's caches), and the same pages on
   the local directory (warm, the OS page cache holding the files).
4. Sizes: access files beside the partitions they are derived from.
5. A publish into the bucket: one day's EDGAR daily index ingested through the proxy, its
   GETs and bytes by kind of object (id runs, late object, partitions, access files, ...).

Prints Markdown tables and writes everything to --out as JSON.
"""
import argparse
import http.client
import http.server
import json
import os
import random
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from datetime import datetime, timedelta, timezone

import duckdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from general_path import free_port, pct  # noqa: E402  (the benches share their helpers)

S3_KEY = "asof-bench-key"
S3_SECRET = "asof-bench-secret-0123456789"


def wait_port(port, deadline=30):
    end = time.time() + deadline
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    sys.exit(f"nothing listens on {port}")


class Log:
    """What went through the proxy: one (path, bytes) per request."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []

    def take(self):
        with self.lock:
            out, self.requests = self.requests, []
        return out


def proxy(upstream_port, delay, log):
    """An HTTP/1.1 forwarding proxy: each request waits `delay` seconds, then goes to s3s-fs
    on a keep-alive connection of its own thread; the response body is counted. Headers pass
    unchanged (the SigV4 signature covers Host, which stays what the client signed)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Small writes go out at once both ways: with Nagle's algorithm and delayed ACKs a
        # response's head and body would wait tens of milliseconds for each other.
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def forward(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            time.sleep(delay)
            if not hasattr(self, "up"):
                self.up = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
            headers = {k: v for k, v in self.headers.items()}
            t = time.perf_counter()
            self.up.request(self.command, self.path, body=body, headers=headers)
            r = self.up.getresponse()
            data = r.read()
            upstream_ms = (time.perf_counter() - t) * 1000
            self.send_response(r.status)
            for k, v in r.getheaders():
                if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            path = urllib.parse.urlsplit(self.path).path
            if self.command == "GET":
                with log.lock:
                    log.requests.append((path, len(data), upstream_ms))

        do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = forward

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    port = free_port()
    srv = Server(("127.0.0.1", port), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return port


class Client:
    def __init__(self, port, keys):
        self.port, self.keys, self.n = port, keys, 0
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def get(self, path):
        self.n += 1
        t = time.perf_counter()
        self.conn.request("GET", path, headers={"Authorization": "Bearer " + self.keys[self.n % len(self.keys)]})
        r = self.conn.getresponse()
        body = r.read()
        return r.status, body, (time.perf_counter() - t) * 1000


def start(bin_, corpus, db, env, log_path):
    """Spawns `asof serve`; returns the process, its port and the seconds to the first 200."""
    port = free_port()
    t = time.perf_counter()
    p = subprocess.Popen([bin_, "serve", "--corpus", corpus, "--listen", f"127.0.0.1:{port}", "--database-url", db],
                         stderr=open(log_path, "w"), env=env)
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return p, port, time.perf_counter() - t
        except OSError:
            pass
        if p.poll() is not None:
            sys.exit("the server did not start: " + open(log_path).read())
        time.sleep(0.005)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--s3s-fs", required=True)
    ap.add_argument("--delay-ms", type=float, default=20)
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--keys", type=int, default=64)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"seed {seed}", flush=True)
    rng = random.Random(seed)
    corpus = os.path.abspath(a.corpus)

    with open(os.path.join(corpus, "manifests", "CURRENT")) as f:
        version = f.read().strip()
    with open(os.path.join(corpus, "manifests", version.split(":", 1)[1] + ".json")) as f:
        manifest = json.load(f)
    parts = [p for p in manifest["partitions"] if p["source_id"] == "sec.edgar" and p["lane"] == "certified_pit"]
    certs = [c for c in manifest["certifications"] if c["source_id"] == "sec.edgar" and c["lane"] == "certified_pit"]
    first_day = min(datetime.fromisoformat(c["from"]) for c in certs).replace(tzinfo=timezone.utc)
    last_day = max(datetime.fromisoformat(c["to"]) for c in certs).replace(tzinfo=timezone.utc)
    sizes = {
        "partitions_bytes": sum(p["bytes"] for p in manifest["partitions"]),
        "access_bytes": sum(e["bytes"] for e in manifest["access"] if e["kind"].startswith("access.")),
        "access_kinds": sorted({e["kind"] for e in manifest["access"] if e["kind"].startswith("access.")}),
        "rows": sum(p["row_count"] for p in manifest["partitions"]),
    }
    sizes["access_over_partitions"] = sizes["access_bytes"] / sizes["partitions_bytes"]
    print(f"corpus {corpus}: {sizes['rows']:,} rows; partitions {sizes['partitions_bytes'] / 2**20:.0f} MiB, "
          f"access files {sizes['access_bytes'] / 2**20:.0f} MiB ({sizes['access_over_partitions']:.2f}x), "
          f"kinds {sizes['access_kinds']}", flush=True)

    # Filers with at least one row, and a cut for each.
    con = duckdb.connect()
    files = [os.path.join(corpus, p["path"]) for p in parts]
    ciks = [r[0] for r in con.execute("SELECT DISTINCT cik FROM read_parquet($f) WHERE cik IS NOT NULL", {"f": files}).fetchall()]
    biggest = con.execute("SELECT cik, count(*) FROM read_parquet($f) WHERE cik IS NOT NULL GROUP BY cik "
                          "ORDER BY 2 DESC LIMIT 1", {"f": files}).fetchone()
    busy = [r[0] for r in con.execute("SELECT cik FROM read_parquet($f) WHERE cik IS NOT NULL GROUP BY cik "
                                      "HAVING count(*) >= 400 ORDER BY cik", {"f": files}).fetchall()]
    rng.shuffle(ciks)
    rng.shuffle(busy)
    span = (last_day - first_day).total_seconds()
    wanted = [(c, (first_day + timedelta(seconds=rng.uniform(span / 2, span))).strftime("%Y-%m-%dT%H:%M:%SZ"))
              for c in ciks[: a.pages]]
    # Filers with a few hundred rows or more (most filers have a handful, so a next page is rare
    # among random ones): their first page and the next.
    wanted_busy = [(c, (first_day + timedelta(seconds=rng.uniform(span / 2, span))).strftime("%Y-%m-%dT%H:%M:%SZ"))
                   for c in busy[: a.pages // 4]]

    work = tempfile.mkdtemp()
    root = os.path.join(work, "s3")
    os.makedirs(os.path.join(root, "corpus"))
    bucket = os.path.join(root, "corpus", "bench")
    try:
        subprocess.run(["cp", "-al", corpus, bucket], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        shutil.copytree(corpus, bucket)
    # s3s-fs keeps an object's ETag beside it when the object arrives by PUT; for a file put
    # in its folder by other means it computes the MD5 of the whole file on every GET (about
    # 100 ms for a 70 MB access file), which S3 never does. Writing the ETags it would have
    # kept makes the bucket behave as one filled by uploads.
    import base64
    import hashlib

    def b64(x):
        return base64.urlsafe_b64encode(x.encode()).decode().rstrip("=")

    for dirpath, _, names in os.walk(bucket):
        for n in names:
            full = os.path.join(dirpath, n)
            key = "bench/" + os.path.relpath(full, bucket)
            md5 = hashlib.md5()
            with open(full, "rb") as f:
                while chunk := f.read(1 << 22):
                    md5.update(chunk)
            with open(os.path.join(root, f".bucket-{b64('corpus')}.object-{b64(key)}.internal.json"), "w") as f:
                json.dump({"e_tag": md5.hexdigest()}, f)
    s3_port = free_port()
    s3 = subprocess.Popen([a.s3s_fs, "--host", "127.0.0.1", "--port", str(s3_port), "--access-key", S3_KEY,
                           "--secret-key", S3_SECRET, root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(s3_port)
    log = Log()
    proxy_port = proxy(s3_port, a.delay_ms / 1000, log)

    db = f"sqlite://{work}/state.db"
    keys = []
    for i in range(a.keys):
        out = subprocess.run([a.bin, "keys", "create", "--database-url", db, "--email", f"cold{i}@example.com", "--plan", "desk"],
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()
        keys.append(out[-1].strip())
    env_s3 = dict(os.environ, ASOF_LOG="warn", AWS_ENDPOINT=f"http://127.0.0.1:{proxy_port}", AWS_ALLOW_HTTP="true",
                  AWS_ACCESS_KEY_ID=S3_KEY, AWS_SECRET_ACCESS_KEY=S3_SECRET, AWS_REGION="us-east-1")
    env_local = dict(os.environ, ASOF_LOG="warn")
    results = {"seed": seed, "delay_ms": a.delay_ms, "sizes": sizes, "version": version}
    procs = []
    try:
        log.take()
        server, port, started = start(a.bin, "s3://corpus/bench", db, env_s3, os.path.join(work, "s3.log"))
        procs.append(server)
        at_start = log.take()
        local, local_port, local_started = start(a.bin, corpus, db, env_local, os.path.join(work, "local.log"))
        procs.append(local)
        results["start"] = {
            "bucket_s": started, "bucket_requests": len(at_start), "bucket_bytes": sum(r[1] for r in at_start),
            "local_s": local_started,
        }
        print(f"start: bucket {started:.2f} s ({len(at_start)} requests, {sum(r[1] for r in at_start) / 2**20:.1f} MiB), "
              f"local {local_started:.2f} s", flush=True)

        def rss_kib(p):
            with open(f"/proc/{p.pid}/status") as f:
                return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))

        c = Client(port, keys)
        rss_before = rss_kib(server)
        rows = {"first": [], "next": [], "busy_first": []}
        first_paths = []
        for i, (cik, t) in enumerate(wanted + wanted_busy):
            first = "first" if i < len(wanted) else "busy_first"
            path = "/v1/news?" + urllib.parse.urlencode({"cik": cik, "as_of": t, "limit": 100})
            first_paths.append(path)
            log.take()
            status, body, ms = c.get(path)
            reqs = log.take()
            if status != 200:
                sys.exit(f"{path}: {status} {body[:300]!r}")
            env = json.loads(body)
            rows[first].append({"ms": ms, "gets": len(reqs), "bytes": sum(r[1] for r in reqs), "store_ms": sum(r[2] for r in reqs), "rows": env["count"]})
            if env.get("next_cursor"):
                path = "/v1/news?" + urllib.parse.urlencode({"cik": cik, "as_of": t, "limit": 100, "cursor": env["next_cursor"]})
                status, body, ms = c.get(path)
                reqs = log.take()
                if status != 200:
                    sys.exit(f"{path}: {status} {body[:300]!r}")
                rows["next"].append({"ms": ms, "gets": len(reqs), "bytes": sum(r[1] for r in reqs), "store_ms": sum(r[2] for r in reqs),
                                     "rows": json.loads(body)["count"]})
        # What the replica's memory grew by for the pages above: decoded blocks in the row
        # cache and compressed ones in the remote cache (neither near its bound here).
        pages_read = sum(len(v) for v in rows.values())
        results["rss_growth_kib_per_page"] = (rss_kib(server) - rss_before) / pages_read
        results["fetched_kib_per_page"] = sum(r["bytes"] for v in rows.values() for r in v) / 1024 / pages_read
        # The walk (issue 42) from the bucket: all-rows first pages at a few cuts, cold.
        walk = []
        for _, t in wanted[:20]:
            path = "/v1/news?" + urllib.parse.urlencode({"as_of": t, "limit": 100})
            log.take()
            status, body, ms = c.get(path)
            reqs = log.take()
            if status != 200:
                sys.exit(f"{path}: {status} {body[:300]!r}")
            walk.append({"ms": ms, "gets": len(reqs), "bytes": sum(r[1] for r in reqs), "store_ms": sum(r[2] for r in reqs), "rows": json.loads(body)["count"]})
        # Warm: the same first pages again, from the replica's caches; then on the local corpus
        # (twice: the second pass is the warm one).
        warm = []
        for path in first_paths:
            status, _, ms = c.get(path)
            warm.append(ms)
        reqs_warm = log.take()
        lc = Client(local_port, keys)
        for path in first_paths:
            lc.get(path)
        local_warm = [lc.get(path)[2] for path in first_paths]
        health = [lc.get("/health")[2] for _ in range(500)]
        # The biggest filer's first 100 rows, warm, on the local directory (the hot path).
        big = "/v1/news?" + urllib.parse.urlencode({"cik": biggest[0], "as_of": last_day.strftime("%Y-%m-%dT%H:%M:%SZ"), "limit": 100})
        for _ in range(50):
            lc.get(big)
        big_ms = [lc.get(big)[2] for _ in range(500)]
        results["biggest_filer"] = {"cik": biggest[0], "rows": biggest[1], "warm_local_ms_p50": pct(big_ms, 0.5),
                                    "warm_local_ms_p99": pct(big_ms, 0.99)}

        def summary(rs):
            return {
                "pages": len(rs),
                "ms_p50": pct([r["ms"] for r in rs], 0.5), "ms_p99": pct([r["ms"] for r in rs], 0.99),
                "ms_max": max(r["ms"] for r in rs),
                "gets_p50": pct([r["gets"] for r in rs], 0.5), "gets_p99": pct([r["gets"] for r in rs], 0.99),
                "gets_max": max(r["gets"] for r in rs),
                "kib_p50": pct([r["bytes"] for r in rs], 0.5) / 1024, "kib_p99": pct([r["bytes"] for r in rs], 0.99) / 1024,
                "kib_max": max(r["bytes"] for r in rs) / 1024,
                "rows_p50": pct([r["rows"] for r in rs], 0.5),
                # Time the store itself took (s3s-fs behind the proxy, delay excluded) per page.
                "store_ms_p50": pct([r["store_ms"] for r in rs], 0.5),
            }

        results["cold_first"] = summary(rows["first"])
        results["cold_busy_first"] = summary(rows["busy_first"])
        results["cold_next"] = summary(rows["next"]) if rows["next"] else None
        results["cold_walk"] = summary(walk)
        results["warm_bucket_ms_p50"] = pct(warm, 0.5)
        results["warm_bucket_requests"] = len(reqs_warm)
        results["warm_local_ms_p50"] = pct(local_warm, 0.5)
        results["warm_local_ms_p99"] = pct(local_warm, 0.99)
        results["health_ms_p50"] = pct(health, 0.5)
        results["raw"] = rows
        print(f"\n{a.delay_ms:.0f} ms per request, {len(wanted)} filers\n")
        print("| page | pages | p50 ms | p99 ms | max ms | GETs p50 | GETs p99 | GETs max | KiB p50 | KiB p99 | KiB max | rows p50 | s3s-fs ms p50 |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for name in ("cold_first", "cold_busy_first", "cold_next", "cold_walk"):
            s = results[name]
            if s:
                print(f"| {name.replace('_', ' ')} | {s['pages']} | {s['ms_p50']:.1f} | {s['ms_p99']:.1f} | {s['ms_max']:.1f} | "
                      f"{s['gets_p50']:.0f} | {s['gets_p99']:.0f} | {s['gets_max']} | {s['kib_p50']:.1f} | {s['kib_p99']:.1f} | "
                      f"{s['kib_max']:.1f} | {s['rows_p50']:.0f} | {s['store_ms_p50']:.1f} |")
        print(f"\nwarm from the replica's caches: p50 {results['warm_bucket_ms_p50']:.2f} ms, "
              f"{len(reqs_warm)} requests; local directory warm: p50 {results['warm_local_ms_p50']:.2f} ms, "
              f"p99 {results['warm_local_ms_p99']:.2f} ms; /health p50 {results['health_ms_p50']:.2f} ms")
        print(f"memory: the replica grew {results['rss_growth_kib_per_page']:.0f} KiB per cold page read "
              f"({results['fetched_kib_per_page']:.0f} KiB fetched per page)")
        b = results["biggest_filer"]
        print(f"biggest filer ({b['cik']}, {b['rows']:,} rows), first 100 rows warm on the local directory: "
              f"p50 {b['warm_local_ms_p50']:.3f} ms, p99 {b['warm_local_ms_p99']:.3f} ms")
        # 5. What a publisher reads from the bucket (issue 47, point 5): one day's EDGAR daily
        # index (the shipped 2022-10-03 file, 4,925 lines) ingested into the corpus in the
        # bucket through the same proxy, its GETs and bytes by kind of object. A daily ingest
        # should read the pointer and manifest, its source-lane's id runs (by ranges), late
        # object and the partitions its ids can be in, never an access file (its rows become
        # a delta file of their era).
        daily = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "snapshots", "sources", "sec.edgar",
                             "daily-index", "company.20221003.idx")
        log.take()
        t = time.perf_counter()
        out = subprocess.run([a.bin, "ingest", "--corpus", "s3://corpus/bench", "--source", "sec.edgar",
                              "--certify", "none", daily],
                             capture_output=True, text=True, env=env_s3)
        ingest_s = time.perf_counter() - t
        if out.returncode != 0:
            sys.exit(f"ingest failed: {out.stderr[-2000:]}")
        reqs = log.take()
        kinds = {}
        for path, n, _ in reqs:
            rel = path.split("/bench/", 1)[-1]
            parts_ = rel.split("/")
            kind = parts_[0] if parts_[0] != "snapshots" else parts_[1]
            k = kinds.setdefault(kind, {"gets": 0, "bytes": 0})
            k["gets"] += 1
            k["bytes"] += n
        results["publish"] = {"seconds": ingest_s, "gets": len(reqs), "bytes": sum(r[1] for r in reqs), "by_kind": kinds}
        print(f"\npublish of one daily index into the bucket: {ingest_s:.1f} s, {len(reqs)} GETs, "
              f"{sum(r[1] for r in reqs) / 2**20:.2f} MiB")
        print("| object | GETs | KiB |\n|---|---|---|")
        for kind, k in sorted(kinds.items()):
            print(f"| {kind} | {k['gets']} | {k['bytes'] / 1024:.1f} |")
        if a.out:
            with open(a.out, "w") as f:
                json.dump(results, f, indent=1)
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        s3.terminate()
        s3.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
