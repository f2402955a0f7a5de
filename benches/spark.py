#!/usr/bin/env python3
"""The as-of rule's cost to Spark: `asof.spark` cuts against Spark's own plain filtered scan of
the same files (no rule) and against `asof sql` on the same machine.

Usage: spark.py --bin <release asof> --corpus <bench corpus dir> [--runs 5] [--warmups 2]
                [--as-of T] [--worker-memory 4g] [--out result.json]

Starts a Spark standalone cluster on loopback (one master, two workers of one core each, as
tests/spark does) and measures, each `--runs` times after `--warmups` unmeasured runs (median
of wall time):

- `cut`: a whole-corpus cut aggregated, the forms counted as of T (`news(as_of=T)` grouped by
  form), against the plain scan `published_at <= T` grouped by form over the same partition
  files, and `asof sql "SELECT form, count(*) FROM news_asof(T) GROUP BY form"` (a process);
- `diff`: a one-day diff counted (`diff(T - 1 day, T)`), against the plain scan of the day's
  window and `asof sql` over `news_diff`.

The rule's answers are checked equal to `asof sql`'s (forms and counts); the plain scan's
differ by the superseded revisions it counts (printed: the error the rule prevents). Target
(issue 60): the rule costs Spark at most 1.3x its plain scan.
"""

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "spark"))
from test_spark import Cluster  # noqa: E402

import asof  # noqa: E402
import asof.spark  # noqa: E402


def timed(f, runs):
    times, answer = [], None
    for _ in range(runs):
        t = time.monotonic()
        answer = f()
        times.append(time.monotonic() - t)
    return statistics.median(times), times, answer


def interleaved(fs, runs):
    """Each of `fs` timed `runs` times, taking turns (a, b, a, b, ...): a JVM still compiling
    or a neighbour's load then weighs on both sides of a ratio alike, where runs of one after
    all runs of the other gave the first the cold runs."""
    times, answers = [[] for _ in fs], [None for _ in fs]
    for _ in range(runs):
        for i, f in enumerate(fs):
            t = time.monotonic()
            answers[i] = f()
            times[i].append(time.monotonic() - t)
    return [(statistics.median(t), t, a) for t, a in zip(times, answers)]


def asof_sql(binary, corpus, q):
    out = subprocess.run([binary, "sql", "--corpus", corpus, "--format", "json", q],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmups", type=int, default=3, help="unmeasured runs of each first (JIT, listing)")
    ap.add_argument("--as-of", default=None, help="the cut (default: a month before the last day)")
    ap.add_argument("--executor-memory", default="3g")
    ap.add_argument("--worker-memory", default="4g", help="what each worker offers (>= executor memory)")
    ap.add_argument("--out")
    args = ap.parse_args()
    corpus = os.path.abspath(args.corpus)
    with open(os.path.join(corpus, "manifests", "CURRENT")) as f:
        version = f.read().strip()
    with open(os.path.join(corpus, "manifests", version.split(":", 1)[1] + ".json")) as f:
        manifest = json.load(f)
    parts = [p for p in manifest["partitions"] if p["source_id"] == "sec.edgar" and p["lane"] == "certified_pit"]
    rows = sum(p["row_count"] for p in parts)
    last = max(p["date"] for p in parts)
    as_of = args.as_of or (dt.date.fromisoformat(last) - dt.timedelta(days=30)).isoformat() + "T20:00:00Z"
    start = (dt.datetime.fromisoformat(as_of.replace("Z", "+00:00")) - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{rows} rows in {len(parts)} partitions; cut at {as_of}, diff ({start}, {as_of}]", flush=True)
    result = {"corpus_rows": rows, "partitions": len(parts), "as_of": as_of, "runs": args.runs}
    with tempfile.TemporaryDirectory() as work:
        cluster = Cluster(work, worker_memory=args.worker_memory)
        try:
            from pyspark.sql import SparkSession, functions as F

            spark = (SparkSession.builder.master(cluster.url).appName("asof-spark-bench")
                     .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                     .config("spark.ui.enabled", "false").config("spark.executor.memory", args.executor_memory)
                     .config("spark.driver.memory", "2g").config("spark.sql.shuffle.partitions", "4")
                     .config("spark.ui.showConsoleProgress", "false")
                     .getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            sc = asof.spark.open(spark, corpus)
            files = [f"file://{corpus}/{p['path']}" for p in parts]
            schema = sc._planner.schema("rows", "spark")
            plain = spark.read.schema(schema).parquet(*files)
            ts = lambda s: F.lit(s).cast("timestamp")  # noqa: E731 - instants with their offset

            def rule_cut():
                return sorted(((r[0], r[1]) for r in sc.news(as_of=as_of).groupBy("form").count().collect()), key=str)

            def plain_cut():
                return sorted(((r[0], r[1]) for r in plain.where(F.col("published_at") <= ts(as_of.replace("Z", "+00:00")))
                              .groupBy("form").count().collect()), key=str)

            def rule_diff():
                return sc.diff(start, as_of).count()

            def plain_diff():
                return plain.where((F.col("published_at") > ts(start.replace("Z", "+00:00")))
                                   & (F.col("published_at") <= ts(as_of.replace("Z", "+00:00")))).count()

            # Warm-ups of each, so no measured run pays the JVMs' compilation or a listing alone
            # (the rule's source-lane DataFrame is listed once per `asof.spark` object, the plain
            # one once per DataFrame).
            for _ in range(args.warmups):
                rule_cut(), plain_cut(), rule_diff(), plain_diff()
            for name, rule, base, sql in (
                ("cut", rule_cut, plain_cut,
                 f"SELECT form, count(*) AS n FROM news_asof('{as_of}') GROUP BY form"),
                ("diff", rule_diff, plain_diff,
                 f"SELECT count(*) AS n FROM news_diff('{start}', '{as_of}')"),
            ):
                (r_med, r_all, r_ans), (p_med, p_all, p_ans) = interleaved([rule, base], args.runs)
                s_med, s_all, s_ans = timed(lambda: asof_sql(args.bin, corpus, sql), args.runs)
                if name == "cut":
                    by_sql = sorted(((x["form"], x["n"]) for x in s_ans), key=str)
                    equal = by_sql == r_ans
                    rule_rows, plain_rows = sum(n for _, n in r_ans), sum(n for _, n in p_ans)
                else:
                    equal = s_ans[0]["n"] == r_ans
                    rule_rows, plain_rows = r_ans, p_ans
                entry = {"rule_s": r_med, "plain_s": p_med, "asof_sql_s": s_med,
                         "rule_over_plain": r_med / p_med, "rule_runs": r_all, "plain_runs": p_all,
                         "asof_sql_runs": s_all, "rows_rule": rule_rows, "rows_plain": plain_rows,
                         "equal_to_asof_sql": equal}
                result[name] = entry
                print(f"{name}: rule {r_med:.2f} s, plain scan {p_med:.2f} s ({r_med / p_med:.2f}x), "
                      f"asof sql {s_med:.2f} s; rows {rule_rows} (plain {plain_rows}, "
                      f"{plain_rows - rule_rows:+d}); equal to asof sql: {equal}", flush=True)
        finally:
            cluster.stop()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    ok = all(result[k]["equal_to_asof_sql"] and result[k]["rule_over_plain"] <= 1.3 for k in ("cut", "diff"))
    print("target met" if ok else "target NOT met", flush=True)


if __name__ == "__main__":
    main()
