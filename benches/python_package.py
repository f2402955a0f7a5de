#!/usr/bin/env python3
"""The Python package on a large corpus: `asof.open` (in-process) beside `asof.connect` (HTTP to
`asof serve` on the same corpus), with the engine's own page (the native call alone) and
`/health` measured in the same run as baselines.

Usage: python_package.py --bin <release asof> --corpus <dir> [--queries 200] [--seed 7]
                         [--out result.json]

Run it with a Python whose `asof` package was built in release mode (`maturin develop
--release` in python/) and which has pyarrow and pandas. Queries, each timed from the call to
the finished object (percentiles over `--queries` cuts drawn uniformly over the corpus's days
after its first year, instants random):

- big filer: `news(cik=<the corpus's largest filer>, as_of=cut)` first page (1,000 rows)
  converted `to_arrow()`; the native page alone (`_native.get_batch`), the engine's share;
- all rows: `news(as_of=cut)` first page `to_arrow()` (the general path), and natively;
- the same first pages as dicts (`records()`, the JSON path);
- a 100,000-row `pandas.DataFrame` of the big filer (`limit=100_000`, 100 pages): 5 runs;
- through `asof.connect`: the big filer's first page `to_arrow()`, and the 100,000-row frame;
  `/health` round trips as the HTTP floor;
- `sql()`: the queries of `benches/sql.py` in-process (`to_arrow()`, 3 runs each, the corpus
  already open), beside `asof sql` of the same query as a whole process (the CLI's figure).
"""

import argparse
import datetime as dt
import json
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from support import Server, create_key  # noqa: E402

import asof  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def summary(name, secs):
    ms = [s * 1000 for s in secs]
    row = {"query": name, "n": len(ms), "p50_ms": round(pct(ms, 50), 3), "p99_ms": round(pct(ms, 99), 3),
           "mean_ms": round(statistics.mean(ms), 3)}
    print(f"{name:58s} n={row['n']:4d}  p50 {row['p50_ms']:9.3f} ms  p99 {row['p99_ms']:9.3f} ms", flush=True)
    return row


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def span(corpus):
    with open(os.path.join(corpus, "manifests", "CURRENT")) as f:
        version = f.read().strip().split(":", 1)[1]
    with open(os.path.join(corpus, "manifests", version + ".json")) as f:
        m = json.load(f)
    days = sorted({p["date"] for p in m["partitions"] if p["source_id"] == "sec.edgar"})
    return dt.date.fromisoformat(days[0]), dt.date.fromisoformat(days[-3])  # last two: uncertified


def cuts(corpus, n, seed):
    first, last = span(corpus)
    start = dt.datetime.combine(first + dt.timedelta(days=365), dt.time(), dt.timezone.utc)
    end = dt.datetime.combine(last, dt.time(), dt.timezone.utc)
    rng = random.Random(seed)
    width = (end - start).total_seconds()
    return [(start + dt.timedelta(seconds=rng.uniform(0, width))).strftime("%Y-%m-%dT%H:%M:%SZ") for _ in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []

    t, local = timed(lambda: asof.open(args.corpus))
    print(f"asof.open: {t * 1000:.1f} ms ({local.corpus_version})", flush=True)
    t, big = timed(lambda: local.sql(
        "SELECT cik, count(*) AS n FROM news WHERE source_id = 'sec.edgar' GROUP BY cik ORDER BY n DESC LIMIT 1"
    ).to_arrow().to_pylist()[0])
    print(f"largest filer: CIK {big['cik']} with {big['n']} rows (found by sql() in {t:.2f} s)", flush=True)
    cik = big["cik"]
    instants = cuts(args.corpus, args.queries, args.seed)
    late = instants and max(instants)
    native = local._native

    def measure(name, f, warm=3):
        for c in instants[:warm]:
            f(c)
        secs = []
        for c in instants:
            secs.append(timed(lambda: f(c))[0])
        rows.append(summary(name, secs))

    measure("open: big filer first page, native page alone",
            lambda c: native.get_batch("/v1/news", f"cik={cik}&as_of={c}&limit=1000"))
    measure("open: big filer first page -> to_arrow()",
            lambda c: local.news(cik=cik, as_of=c, limit=1000).to_arrow())
    measure("open: big filer first page -> records() (dicts)",
            lambda c: local.news(cik=cik, as_of=c, limit=1000).records())
    measure("open: all rows first page, native page alone",
            lambda c: native.get_batch("/v1/news", f"as_of={c}&limit=1000"))
    measure("open: all rows first page -> to_arrow()",
            lambda c: local.news(as_of=c, limit=1000).to_arrow())

    def frame(api):
        df = api.news(cik=cik, as_of=late, limit=100_000).to_pandas()
        assert len(df) == min(100_000, big["n"]) or len(df) > 50_000, len(df)
        return df

    secs = [timed(lambda: frame(local))[0] for _ in range(5)]
    rows.append(summary("open: 100,000-row pandas frame (100 pages)", secs))

    with tempfile.TemporaryDirectory() as work:
        server = Server(os.path.abspath(args.bin), work, corpus=os.path.abspath(args.corpus))
        try:
            # Enough keys that no answer is a 429 (a waited-out limit would hide in the times):
            # retries=0 makes any 429 an exception that stops the run.
            keys = [create_key(os.path.abspath(args.bin), server.db, "desk") for _ in range(6)]
            svcs = [asof.connect(server.base, k, retries=0) for k in keys]
            turn = iter(range(10**9))

            def svc():
                return svcs[next(turn) % len(svcs)]

            measure("connect: /health round trip (HTTP floor)",
                    lambda c: urllib.request.urlopen(server.base + "/health").read())
            measure("connect: big filer first page -> to_arrow()",
                    lambda c: svc().news(cik=cik, as_of=c, limit=1000).to_arrow())
            measure("connect: all rows first page -> to_arrow()",
                    lambda c: svc().news(as_of=c, limit=1000).to_arrow())
            secs = [timed(lambda: frame(svc()))[0] for _ in range(5)]
            rows.append(summary("connect: 100,000-row pandas frame (100 pages)", secs))
        finally:
            server.stop()

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sql as sql_bench  # benches/sql.py: the same queries

    for name, query, _ in sql_bench.queries(args.corpus):
        secs = [timed(lambda: local.sql(query).to_arrow())[0] for _ in range(3)]
        rows.append(summary(f"sql(): {name}", secs))
        runs = [sql_bench.run_wait4([os.path.abspath(args.bin), "sql", "--corpus", args.corpus,
                                     "--format", "csv", query]) for _ in range(3)]
        assert all(r[0] == 0 for r in runs), runs[0][2]
        rows.append(summary(f"asof sql process: {name}", [r[3] / 1000 for r in runs]))

    if args.out:
        with open(args.out, "w") as f:
            json.dump({"corpus": args.corpus, "version": local.corpus_version, "big_filer": big,
                       "queries": args.queries, "seed": args.seed, "rows": rows,
                       "python": sys.version.split()[0]}, f, indent=2)


if __name__ == "__main__":
    main()
