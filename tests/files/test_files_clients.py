#!/usr/bin/env python3
"""Flat files read by the clients analysts use, against the real binary.

1. Embedded default (the shipped sample corpus on a local directory): `/v1/files` with a Power
   key; DuckDB (`duckdb==1.4.4` with the httpfs extension from PyPI, loaded from its file:
   nothing is downloaded at run time) runs `SELECT count(*) FROM read_parquet('<signed url>')`
   and gets the file object's `row_count`; pandas (pyarrow) reads the same URL; curl fetches
   it and the sha256 matches; the README's curl + DuckDB lines are these.
2. A corpus in S3 (s3s-fs on loopback, which verifies SigV4): `asof ingest` publishes a CFTC
   file into it, `asof serve --corpus s3://...` answers presigned URLs, and DuckDB and pandas
   read them straight from the object store.

Prints 'files clients: N passed, N failed'.
"""

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
from support import Server, create_key, duckdb_with, free_port, http_get  # noqa: E402

import pandas  # noqa: E402


def files(server, key, query):
    _, body = http_get(f"{server.base}/v1/files{query}", headers={"Authorization": f"Bearer {key}"})
    return json.loads(body)


def duckdb_count(url):
    con = duckdb_with("httpfs")
    return con.execute("SELECT count(*) FROM read_parquet(?)", [url]).fetchone()[0]


def check_reads(f):
    """DuckDB, pandas and curl read one file object's URL; returns the failures."""
    failed = []
    url = f["url"]
    n = duckdb_count(url)
    if n != f["row_count"]:
        failed.append(f"duckdb counted {n} rows in {f['id']}, the file object says {f['row_count']}")
    df = pandas.read_parquet(io.BytesIO(urllib.request.urlopen(url).read()))
    if len(df) != f["row_count"]:
        failed.append(f"pandas read {len(df)} rows, expected {f['row_count']}")
    got = subprocess.run(["curl", "-sSf", url], check=True, capture_output=True).stdout
    if hashlib.sha256(got).hexdigest() != f["sha256"]:
        failed.append("curl bytes differ from the file object's sha256")
    return failed


def check_local(binary, work):
    server = Server(binary, work)
    try:
        key = create_key(binary, server.db, "power")
        page = files(server, key, "?source=us.cftc.cot&limit=2")
        assert page["count"] >= 1, page
        failed = []
        for f in page["results"]:
            if f["url_kind"] != "service":
                failed.append(f"expected a service-signed URL on a local corpus, got {f['url_kind']}")
            failed += check_reads(f)
        # pandas straight from the URL (its own HTTP reader) as well.
        df = pandas.read_parquet(page["results"][0]["url"])
        if len(df) != page["results"][0]["row_count"]:
            failed.append("pandas.read_parquet(url) row count differs")
        return failed
    finally:
        server.stop()


class S3:
    def __init__(self, binary, root):
        self.port = free_port()
        os.makedirs(os.path.join(root, "corpus"))
        self.proc = subprocess.Popen(
            [binary, "--host", "127.0.0.1", "--port", str(self.port), "--access-key", "asof-test-key",
             "--secret-key", "asof-test-secret-0123456789", root],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                http_get(f"http://127.0.0.1:{self.port}/", timeout=1)
                break
            except urllib.error.HTTPError:
                break  # answering (403 without credentials): ready
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("s3s-fs not listening after 20 s")
                time.sleep(0.05)
        self.env = {
            "AWS_ENDPOINT": f"http://127.0.0.1:{self.port}",
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "asof-test-key",
            "AWS_SECRET_ACCESS_KEY": "asof-test-secret-0123456789",
            "AWS_REGION": "us-east-1",
        }

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def check_s3(binary, s3s, work):
    s3 = S3(s3s, os.path.join(work, "s3"))
    try:
        corpus = "s3://corpus/clients"
        src = os.path.join(REPO, "snapshots/sources/us.cftc.cot/disaggregated_futures_only_2021/f_year.txt")
        subprocess.run(
            [binary, "ingest", "--corpus", corpus, "--source", "us.cftc.cot", "--commit-time",
             "2026-01-01T00:00:00Z", src],
            check=True, capture_output=True, env={**os.environ, **s3.env},
        )
        server = Server(binary, work, corpus=corpus, env=s3.env)
        try:
            key = create_key(binary, server.db, "power")
            page = files(server, key, "?limit=1")
            f = page["results"][0]
            failed = []
            if f["url_kind"] != "presigned" or "X-Amz-Signature=" not in f["url"]:
                failed.append(f"expected an S3 presigned URL, got {f['url']}")
            failed += check_reads(f)
            return failed
        finally:
            server.stop()
    finally:
        s3.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--s3s-fs", default=os.environ.get("ASOF_S3S_FS"))
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as work:
        try:
            results["local: duckdb, pandas, curl read service-signed URLs"] = check_local(args.bin, work)
        except Exception as e:  # a crash is a failure, reported by name
            results["local: duckdb, pandas, curl read service-signed URLs"] = [repr(e)]
        name = "s3: duckdb, pandas, curl read presigned URLs"
        if args.s3s_fs and os.path.isfile(args.s3s_fs):
            try:
                results[name] = check_s3(args.bin, args.s3s_fs, work)
            except Exception as e:
                results[name] = [repr(e)]
        elif os.environ.get("ASOF_REQUIRE_S3") == "1":
            results[name] = ["ASOF_REQUIRE_S3=1 but no s3s-fs binary"]
        else:
            print(f"skipped: {name} (no s3s-fs)")
    passed = sum(1 for v in results.values() if not v)
    for k, v in results.items():
        print(("ok   " if not v else "FAIL ") + k)
        for line in v:
            print("     " + line)
    print(f"files clients: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
