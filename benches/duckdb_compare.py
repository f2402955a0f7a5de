#!/usr/bin/env python3
"""DuckDB answering the engine's benchmark queries over the same daily partitions.

Usage: duckdb_compare.py CORPUS QUERIES.jsonl [--per-size N]

CORPUS is a directory written by `asof bench-corpus`; QUERIES.jsonl is what
`asof-bench --emit-queries` drew. For the first N queries of each filer size (big, small) it
times the first page of the as-of cut the engine answers:

    SELECT * FROM read_parquet([every certified-lane partition of the manifest])
    WHERE cik = ? AND published_at IS NOT NULL AND published_at <= ?
    ORDER BY published_at, id LIMIT 101

with bound parameters, in one warm DuckDB connection (the file list is the manifest's, as the
engine's). Prints a Markdown table and one JSON line with p50/p99 per size.
"""
import json
import os
import statistics
import sys
import time

import duckdb


def percentile(values, p):
    s = sorted(values)
    return s[round((len(s) - 1) * p)]


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    corpus, queries_path = args[0], args[1]
    per_size = int(args[args.index("--per-size") + 1]) if "--per-size" in args else 20
    with open(os.path.join(corpus, "manifests", "CURRENT")) as f:
        version = f.read().strip()
    with open(os.path.join(corpus, "manifests", version.split(":", 1)[1] + ".json")) as f:
        manifest = json.load(f)
    files = [
        os.path.join(corpus, p["path"])
        for p in manifest["partitions"]
        if p["source_id"] == "sec.edgar" and p["lane"] == "certified_pit"
    ]
    queries = [json.loads(line) for line in open(queries_path)]
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    sql = (
        "SELECT * FROM read_parquet($files) WHERE cik = $cik AND published_at IS NOT NULL "
        "AND published_at <= $as_of::TIMESTAMPTZ ORDER BY published_at, id LIMIT 101"
    )
    # One untimed query: DuckDB reads footers on first use, as a warm service would have.
    con.execute(sql, {"files": files, "cik": queries[0]["cik"], "as_of": queries[0]["as_of"]}).fetchall()
    results = {}
    print("| filers | path | queries | p50 | p99 |\n|---|---|---|---|---|")
    for size in ("big", "small"):
        times = []
        for q in [q for q in queries if q["size"] == size][:per_size]:
            t = time.perf_counter()
            con.execute(sql, {"files": files, "cik": q["cik"], "as_of": q["as_of"]}).fetchall()
            times.append((time.perf_counter() - t) * 1e6)
        p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
        results[size] = {"n": len(times), "p50_us": p50, "p99_us": p99, "mean_us": statistics.mean(times)}
        print(f"| {size} | duckdb_first_page | {len(times)} | {p50/1000:.1f} ms | {p99/1000:.1f} ms |")
    print(json.dumps({"duckdb": duckdb.__version__, "files": len(files), "results": results}))


if __name__ == "__main__":
    main()
