#!/usr/bin/env python3
"""`asof sql` against DuckDB, each query a whole process as an analyst types it.

Usage: sql.py --bin <release asof> --corpus <dir> [--python <venv python with duckdb>]
              [--runs 3] [--out result.json]

For each query: `asof sql --corpus DIR --format csv "<query>"` run `--runs` times (wall time and
peak RSS of the process, from wait4), and the same query in a fresh Python process running
DuckDB over the same partition files (a view `news` over `read_parquet` of every partition).
The answers are compared (CSV rows, sorted where the query has no total order). `SELECT 1`
measures what a process pays before any query: opening the corpus.
"""

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import time


def month_before_last(corpus):
    with open(os.path.join(corpus, "manifests", "CURRENT")) as f:
        version = f.read().strip().split(":", 1)[1]
    with open(os.path.join(corpus, "manifests", version + ".json")) as f:
        m = json.load(f)
    last = max(p["date"] for p in m["partitions"])
    y, mo = int(last[:4]), int(last[5:7])
    y, mo = (y, mo - 1) if mo > 1 else (y - 1, 12)
    start = f"{y:04d}-{mo:02d}-01"
    y2, mo2 = (y, mo + 1) if mo < 12 else (y + 1, 1)
    return start, f"{y2:04d}-{mo2:02d}-01", len(m["partitions"])


def queries(corpus):
    """(name, asof sql, DuckDB sql or None for the same text)."""
    start, end, _ = month_before_last(corpus)
    cut = f"{start}T12:00:00Z"
    # The as-of rule written by hand for DuckDB: the certified lane's rows of sec.edgar
    # published by the cut, less every revision some row supersedes (published_at answers
    # with the latest revision).
    duck_cut = (
        "SELECT form, count(*) AS n FROM news AS r WHERE source_id = 'sec.edgar' "
        "AND lane = 'certified_pit' AND published_at IS NOT NULL "
        f"AND published_at <= TIMESTAMPTZ '{start} 12:00:00+00' "
        "AND NOT EXISTS (SELECT 1 FROM news AS s WHERE s.supersedes = r.revision_id) "
        "GROUP BY form ORDER BY n DESC, form LIMIT 5"
    )
    return [
        ("open only", "SELECT 1 AS one", None),
        ("count", "SELECT count(*) AS n FROM news", None),
        ("forms", "SELECT form, count(*) AS n FROM news GROUP BY form ORDER BY n DESC, form LIMIT 5", None),
        ("one filer", "SELECT id, form, published_at FROM news WHERE cik = '5' ORDER BY id, published_at", None),
        ("one month by day",
         f"SELECT CAST(published_at AS DATE) AS day, count(*) AS n FROM news "
         f"WHERE published_at >= TIMESTAMP '{start} 00:00:00' AND published_at < TIMESTAMP '{end} 00:00:00' "
         f"GROUP BY day ORDER BY day", None),
        ("top filers", "SELECT cik, count(*) AS n FROM news GROUP BY cik ORDER BY n DESC, cik LIMIT 10", None),
        ("forms by filer",
         "SELECT cik, form, count(*) AS n FROM news WHERE cik IN ('5', '7', '11') "
         "GROUP BY cik, form ORDER BY cik, n DESC, form", None),
        ("8-Ks of one week",
         f"SELECT count(*) AS n FROM news WHERE form = '8-K' "
         f"AND published_at >= TIMESTAMP '{start} 00:00:00' AND published_at < TIMESTAMP '{start} 00:00:00' + INTERVAL '7 days'",
         None),
        ("corrections joined to what they correct",
         "SELECT count(*) AS n FROM news AS a JOIN news AS b ON a.supersedes = b.revision_id", None),
        ("forms at a cut (news_asof)",
         f"SELECT form, count(*) AS n FROM news_asof('{cut}') GROUP BY form ORDER BY n DESC, form LIMIT 5",
         duck_cut),
    ]


def run_wait4(cmd):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    ms = (time.perf_counter() - t) * 1000
    code = os.waitstatus_to_exitcode(status)
    return code, out.decode(), err.decode(), ms, ru.ru_maxrss / 1024  # MiB


DUCK = r"""
import duckdb, sys, time
corpus, q = sys.argv[1], sys.argv[2]
c = duckdb.connect()
# Its progress bar goes to standard output on queries over two seconds.
c.execute("SET enable_progress_bar = false")
c.execute(f"CREATE VIEW news AS SELECT * FROM read_parquet('{corpus}/snapshots/partitions/*/*/*/*.parquet')")
t = time.perf_counter()
rows = c.execute(q).fetchall()
ms = (time.perf_counter() - t) * 1000
cols = [d[0] for d in c.description]
import csv
w = csv.writer(sys.stdout, lineterminator="\n")
w.writerow(cols)
for r in rows:
    w.writerow(["" if v is None else (v.isoformat() if hasattr(v, "isoformat") else v) for v in r])
print(f"QUERY_MS {ms:.1f}", file=sys.stderr)
"""


def norm(text):
    rows = list(csv.reader(io.StringIO(text, newline="")))
    body = rows[1:]
    out = []
    for r in body:
        out.append(tuple(v.replace("T", " ").rstrip("Z").split("+")[0] if ":" in v else v for v in r))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    _, _, nparts = month_before_last(a.corpus)
    print(f"{nparts} partitions", flush=True)
    results = []
    for name, q, dq in queries(a.corpus):
        ours, duck = [], []
        ours_out = duck_out = None
        for _ in range(a.runs):
            code, out, err, ms, rss = run_wait4([a.bin, "sql", "--corpus", a.corpus, "--format", "csv", q])
            if code != 0:
                print(f"asof sql failed on {name}: {err[-2000:]}", file=sys.stderr)
                sys.exit(1)
            ours.append((ms, rss))
            ours_out = out
            code, out, err, ms, rss = run_wait4([a.python, "-c", DUCK, a.corpus, dq or q])
            if code != 0:
                print(f"duckdb failed on {name}: {err[-2000:]}", file=sys.stderr)
                sys.exit(1)
            qms = float(err.split("QUERY_MS")[1].split()[0])
            duck.append((ms, rss, qms))
            duck_out = out
        same = norm(ours_out) == norm(duck_out)
        best = min(ours)
        dbest = min(duck)
        r = {
            "query": name, "sql": q,
            "asof_ms": [round(m, 1) for m, _ in ours], "asof_rss_mib": round(max(r for _, r in ours), 1),
            "duckdb_process_ms": [round(m, 1) for m, _, _ in duck],
            "duckdb_query_ms": [round(q, 1) for _, _, q in duck],
            "duckdb_rss_mib": round(max(r for _, r, _ in duck), 1),
            "ratio_best_process": round(best[0] / dbest[0], 2),
            "same_answer": same,
        }
        results.append(r)
        print(f"{name:18s} asof {best[0]:9.1f} ms ({r['asof_rss_mib']:7.1f} MiB)  "
              f"duckdb process {dbest[0]:8.1f} ms, query {min(q for _, _, q in duck):8.1f} ms "
              f"({r['duckdb_rss_mib']:7.1f} MiB)  ratio {r['ratio_best_process']:5.2f}x  same={same}", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"partitions": nparts, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
