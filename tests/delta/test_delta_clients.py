#!/usr/bin/env python3
"""Every corpus version is a Delta table version: read by Delta clients the project does not write.

1. Three publishes into a fresh corpus with the real binary (`asof ingest`: two CFTC files,
   then a Federal Register file that leaves the CFTC table alone). After each, `asof sql`
   gives the rows of that corpus version. Then, for every corpus version and every table it
   holds, Python `deltalake` (`DeltaTable(root, version=N)`) and Polars
   (`scan_delta(root, version=N)`), with N the table version the manifest records, read
   exactly those rows; the commit's `commitInfo` names the corpus version; DuckDB with the
   delta extension from PyPI (loaded from its file: nothing downloaded at run time) reads the
   latest version of each table. The rule tables beside each record table (`supersessions`,
   `coverage`) and the identity table are Delta tables too: at every corpus version, each
   read at its recorded version holds exactly the one file the manifest lists, and the CFTC
   coverage table time-travels (versions 0, 1, 1 over the three publishes).
2. The shipped sample (a corpus published before the tables existed, logs written by
   `asof delta backfill`): every table at version 0 read by deltalake, Polars and DuckDB holds
   exactly the rows `asof sql` counts for its source and lane.

Prints 'delta clients: N passed, N failed'.
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
from support import duckdb_with  # noqa: E402

import polars  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from deltalake import DeltaTable  # noqa: E402

CFTC = os.path.join(REPO, "snapshots/sources/us.cftc.cot/legacy_futures_only_2025_weekly_asof")
FEDREG = os.path.join(REPO, "snapshots/sources/us.federal_register.pi/api_json/inspection-search.json")


def run(binary, *args):
    out = subprocess.run([binary, *args], check=True, capture_output=True, text=True)
    return out.stdout


def sql_rows(binary, corpus, source, lane):
    """(id, revision_id) of every row of a source and lane, as `asof sql` gives them."""
    # Source and lane come from this script's own constants and the manifest's closed vocabulary.
    q = (f"SELECT id, revision_id FROM news WHERE source_id = '{source}' AND lane = '{lane}'")
    rows = json.loads(run(binary, "sql", "--corpus", corpus, "--format", "json", q))
    return sorted((r["id"], r["revision_id"]) for r in rows)


def manifest(corpus, version):
    with open(os.path.join(corpus, "manifests", version.split(":", 1)[1] + ".json")) as f:
        return json.load(f)


def is_records(key):
    """A records table's key is `<source>/<lane>`; a rule table's has a third part."""
    return key.count("/") == 1


def table_root(corpus, key):
    if key == "identity":
        return os.path.join(corpus, "snapshots", "identity")
    if is_records(key):
        return os.path.join(corpus, "snapshots", "partitions", *key.split("/"))
    return os.path.join(corpus, "snapshots", "rule", *key.split("/"))


def listed_rows(corpus, m, key):
    """The rows of the one file the manifest lists for a rule or identity table."""
    root = table_root(corpus, key)
    files = [e["path"] for e in m["access"] + m["identity"]
             if (e["kind"].startswith("rule.") or e["kind"] == "identity.ticker_intervals")
             and os.path.dirname(os.path.join(corpus, e["path"])) == root]
    if len(files) != 1:
        raise AssertionError(f"{key}: the manifest lists {len(files)} files, not one")
    return rows_of(pq.read_table(os.path.join(corpus, files[0])))


def rows_of(table):
    """A table's rows as sorted JSON strings (order-free, types compared as text)."""
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


def check_single_file_table(corpus, version, m, key, n, failed):
    """A rule or identity table at table version n: exactly the file the manifest lists."""
    root = table_root(corpus, key)
    want = listed_rows(corpus, m, key)
    dt = DeltaTable(root, version=n)
    got = rows_of(dt.to_pyarrow_table())
    if got != want:
        failed.append(f"{version} {key}: deltalake at version {n} read {len(got)} rows, the listed file {len(want)}")
    if len(dt.file_uris()) != 1:
        failed.append(f"{version} {key}: version {n} has {len(dt.file_uris())} files")
    pl = polars.scan_delta(root, version=n).collect()
    if len(pl) != len(want):
        failed.append(f"{version} {key}: polars at version {n} read {len(pl)} rows, the file {len(want)}")


def pairs(table):
    return sorted(zip(table["id"], table["revision_id"]))


def check_version(binary, corpus, version, expected, failed):
    """Every table of `version` read at the table version its manifest records."""
    m = manifest(corpus, version)
    tables = m.get("delta")
    if not tables:
        failed.append(f"{version}: the manifest records no Delta table versions")
        return {}
    for key, n in tables.items():
        if not is_records(key):
            check_single_file_table(corpus, version, m, key, n, failed)
            continue
        root = table_root(corpus, key)
        want = expected[key]
        dt = DeltaTable(root, version=n)
        got = pairs(dt.to_pyarrow_table(columns=["id", "revision_id"]).to_pydict())
        if got != want:
            failed.append(f"{version} {key}: deltalake at version {n} read {len(got)} rows, asof sql {len(want)}")
        info = next(h for h in dt.history() if h["version"] == n)
        if info.get("asof.corpusVersion") != version:
            # A table the publish left alone keeps the version an earlier corpus version made.
            if info.get("asof.corpusVersion") not in expected.get("_chain", []):
                failed.append(f"{version} {key}: commit {n} names {info.get('asof.corpusVersion')}")
        pl = polars.scan_delta(root, version=n).select(["id", "revision_id"]).collect()
        if pairs(pl.to_dict(as_series=False)) != want:
            failed.append(f"{version} {key}: polars at version {n} read {pl.height} rows, asof sql {len(want)}")
    return tables


def check_publishes(binary, work):
    failed = []
    corpus = os.path.join(work, "corpus")
    steps = [
        ("us.cftc.cot", "2025-01-13T00:00:00Z", os.path.join(CFTC, "annual.txt.committed_2025-01-13")),
        ("us.cftc.cot", "2025-01-17T00:00:00Z", os.path.join(CFTC, "annual.txt.committed_2025-01-17")),
        ("us.federal_register.pi", "2026-11-20T00:00:00Z", FEDREG),
    ]
    versions = []
    for source, at, path in steps:
        out = run(binary, "ingest", "--corpus", corpus, "--source", source, "--commit-time", at, path)
        version = out.strip().splitlines()[-1]
        keys = manifest(corpus, version).get("delta", {}).keys()
        expected = {k: sql_rows(binary, corpus, *k.split("/")) for k in keys if is_records(k)}
        versions.append((version, expected))
    chain = [v for v, _ in versions]
    recorded = []
    for version, expected in versions:
        expected["_chain"] = chain
        recorded.append(check_version(binary, corpus, version, expected, failed))
    cftc = "us.cftc.cot/certified_pit"
    fedreg = "us.federal_register.pi/certified_pit"
    got = [r.get(cftc) for r in recorded]
    if got != [0, 1, 1]:
        failed.append(f"the CFTC table's versions over the three publishes are {got}, expected [0, 1, 1]")
    rule = [r.get(cftc + "/coverage") for r in recorded]
    if rule != [0, 1, 1]:
        failed.append(f"the CFTC coverage table's versions over the three publishes are {rule}, expected [0, 1, 1]")
    if not any(k.endswith("/supersessions") for k in recorded[-1]):
        failed.append("no supersessions table is a Delta table")
    if recorded[-1].get(fedreg) != 0:
        failed.append(f"the Federal Register table is at {recorded[-1].get(fedreg)} after its first publish")
    # Time travel is real: the two CFTC versions hold different rows.
    if versions[0][1][cftc] == versions[1][1][cftc]:
        failed.append("the two CFTC publishes hold the same rows: the test travels nowhere")
    con = duckdb_with("delta")
    last = manifest(corpus, versions[-1][0])
    for key in last["delta"]:
        if is_records(key):
            continue
        n = con.execute("SELECT count(*) FROM delta_scan(?)", [table_root(corpus, key)]).fetchone()[0]
        if n != len(listed_rows(corpus, last, key)):
            failed.append(f"duckdb delta_scan of {key} (latest) counted {n}, the listed file otherwise")
    for key, rows in versions[-1][1].items():
        if key == "_chain":
            continue
        n = con.execute("SELECT count(*) FROM delta_scan(?)", [table_root(corpus, key)]).fetchone()[0]
        if n != len(rows):
            failed.append(f"duckdb delta_scan of {key} (latest) counted {n}, asof sql {len(rows)}")
    verify = run(binary, "verify", "--corpus", corpus)
    commits = sum(1 for _ in glob.glob(os.path.join(corpus, "snapshots", "**", "_delta_log", "*.json"), recursive=True))
    if f"{commits} commits re-derived and equal" not in verify:
        failed.append(f"asof verify did not re-derive the three commits: {verify}")
    return failed


def check_sample(binary, work):
    """The shipped sample's tables (logs from `asof delta backfill`) at version 0."""
    failed = []
    corpus = os.path.join(work, "sample")
    os.makedirs(corpus)
    for d in ("manifests", "snapshots"):
        shutil.copytree(os.path.join(REPO, d), os.path.join(corpus, d))
    version = open(os.path.join(corpus, "manifests", "CURRENT")).read().strip()
    counts = json.loads(run(binary, "sql", "--corpus", corpus, "--format", "json",
                            "SELECT source_id, lane, count(*) AS n FROM news GROUP BY source_id, lane"))
    con = duckdb_with("delta")
    if not counts:
        failed.append("asof sql counted no rows in the sample")
    for c in counts:
        root = table_root(corpus, f"{c['source_id']}/{c['lane']}")
        dt = DeltaTable(root, version=0)
        n_dl = dt.to_pyarrow_table(columns=["id"]).num_rows
        n_pl = polars.scan_delta(root, version=0).select(polars.len()).collect().item()
        n_dd = con.execute("SELECT count(*) FROM delta_scan(?)", [root]).fetchone()[0]
        if not (n_dl == n_pl == n_dd == c["n"]):
            failed.append(f"sample {c['source_id']}/{c['lane']}: asof sql {c['n']}, deltalake {n_dl}, polars {n_pl}, duckdb {n_dd}")
        if dt.history()[-1].get("asof.corpusVersion") != version:
            failed.append(f"sample {c['source_id']}/{c['lane']}: version 0 names another corpus version")
    m = manifest(corpus, version)
    single = [k for k in m.get("delta", {}) if not is_records(k)]
    if "identity" not in single or not any(k.endswith("/coverage") for k in single):
        failed.append(f"the sample's rule and identity tables are not Delta tables: {single}")
    for key in single:
        check_single_file_table(corpus, version, m, key, m["delta"][key], failed)
        n_dd = con.execute("SELECT count(*) FROM delta_scan(?)", [table_root(corpus, key)]).fetchone()[0]
        if n_dd != len(listed_rows(corpus, m, key)):
            failed.append(f"sample {key}: duckdb delta_scan counted {n_dd}")
    return failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    results = {}
    checks = {
        "three publishes: deltalake and polars read every table at every version as asof sql; duckdb the latest": check_publishes,
        "the shipped sample: every table at version 0, deltalake, polars and duckdb": check_sample,
    }
    with tempfile.TemporaryDirectory() as work:
        for i, (name, check) in enumerate(checks.items()):
            d = os.path.join(work, str(i))
            os.makedirs(d)
            try:
                results[name] = check(args.bin, d)
            except Exception as e:  # a crash is a failure, reported by name
                results[name] = [repr(e)]
    passed = 0
    for name, failed in results.items():
        print(("FAIL " if failed else "ok   ") + name)
        for f in failed:
            print("     " + f)
        passed += not failed
    print(f"delta clients: {passed} passed, {len(results) - passed} failed")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
