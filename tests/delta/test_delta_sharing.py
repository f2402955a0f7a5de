#!/usr/bin/env python3
"""The corpus's Delta tables over the Delta Sharing protocol, read by its official client.

Runs in a virtual environment of its own (tests/requirements-sharing.txt: `delta-sharing`
1.4.2 needs pandas < 3 and pyarrow <= 23.0.1). Against the real binary:

1. Two CFTC publishes into a fresh corpus (`asof ingest`); `asof sql` gives each version's rows.
2. `asof serve` over it; `asof keys create --plan power --delta-sharing-profile FILE` writes the
   profile the client reads.
3. `SharingClient.list_all_tables()` lists the table; `load_as_pandas(profile#share.schema.table,
   version=N)` at both table versions, with no version (the latest) and with a timestamp
   between the publishes gets exactly the rows of the matching corpus version; the files come
   from the service's signed URLs (fsspec over HTTP, byte ranges).
4. Refusals: an expired key (401), a key the service never issued (401) and a Researcher key
   (403, the plan) get no rows.

Prints 'delta sharing: N passed, N failed'.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
from support import Server  # noqa: E402

import delta_sharing  # noqa: E402
from requests.exceptions import HTTPError  # noqa: E402

CFTC = os.path.join(REPO, "snapshots/sources/us.cftc.cot/legacy_futures_only_2025_weekly_asof")
TABLE = "asof.us_cftc_cot.certified_pit"


def run(binary, *args):
    return subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout


def sql_rows(binary, corpus):
    q = "SELECT id, revision_id FROM news WHERE source_id = 'us.cftc.cot' AND lane = 'certified_pit'"
    rows = json.loads(run(binary, "sql", "--corpus", corpus, "--format", "json", q))
    return sorted((r["id"], r["revision_id"]) for r in rows)


def key_with_profile(binary, server, work, name, plan, expires_at=None):
    path = os.path.join(work, f"{name}.share")
    args = ["keys", "create", "--database-url", server.db, "--email", f"{name}@sharing.test",
            "--plan", plan, "--delta-sharing-profile", path, "--public-url", server.base]
    if expires_at:
        args += ["--expires-at", expires_at]
    run(binary, *args)
    return path


def rows_of(df):
    return sorted(zip(df["id"], df["revision_id"]))


def refused(profile, status):
    """Whether reading the table with `profile` is refused with HTTP `status`."""
    try:
        delta_sharing.load_as_pandas(f"{profile}#{TABLE}")
    except HTTPError as e:
        return e.response is not None and e.response.status_code == status
    return False


def check(binary, work):
    failed = []
    corpus = os.path.join(work, "corpus")
    expected = []
    for at, f in [("2025-01-13T00:00:00Z", "annual.txt.committed_2025-01-13"),
                  ("2025-01-17T00:00:00Z", "annual.txt.committed_2025-01-17")]:
        run(binary, "ingest", "--corpus", corpus, "--source", "us.cftc.cot", "--commit-time", at,
            os.path.join(CFTC, f))
        expected.append(sql_rows(binary, corpus))
    if expected[0] == expected[1]:
        failed.append("the two publishes hold the same rows: the test travels nowhere")
    server = Server(binary, work, corpus=corpus)
    try:
        profile = key_with_profile(binary, server, work, "power", "power")
        with open(profile) as f:
            p = json.load(f)
        if p.get("endpoint") != server.base + "/delta-sharing" or not p.get("bearerToken", "").startswith("svc_live_"):
            failed.append(f"the profile file is not one for this server: {sorted(p)}")
        if oct(os.stat(profile).st_mode & 0o777) != "0o600":
            failed.append("the profile file (a secret) is readable by others")
        client = delta_sharing.SharingClient(profile)
        names = sorted(f"{t.share}.{t.schema}.{t.name}" for t in client.list_all_tables())
        if TABLE not in names:
            failed.append(f"list_all_tables: {names}")
        for version, want in enumerate(expected):
            got = rows_of(delta_sharing.load_as_pandas(f"{profile}#{TABLE}", version=version))
            if got != want:
                failed.append(f"version {version}: {len(got)} rows through Delta Sharing, asof sql {len(want)}")
        latest = rows_of(delta_sharing.load_as_pandas(f"{profile}#{TABLE}"))
        if latest != expected[-1]:
            failed.append(f"latest: {len(latest)} rows, asof sql {len(expected[-1])}")
        between = rows_of(delta_sharing.load_as_pandas(f"{profile}#{TABLE}", timestamp="2025-01-15T00:00:00Z"))
        if between != expected[0]:
            failed.append(f"timestamp between the publishes: {len(between)} rows, version 0 has {len(expected[0])}")
        # Refusals: the same table, the wrong credentials.
        soon = time.gmtime(time.time() + 3)
        expiring = key_with_profile(binary, server, work, "expiring", "power",
                                    expires_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", soon))
        if not rows_of(delta_sharing.load_as_pandas(f"{expiring}#{TABLE}", version=0)) == expected[0]:
            failed.append("the expiring key read nothing before it expired")
        # Wait out its expiry (an instant the key names, not a readiness guess); key lookups
        # are cached for 5 s, so the refusal is awaited up to that bound.
        deadline = time.monotonic() + 15
        while not refused(expiring, 401):
            if time.monotonic() > deadline:
                failed.append("an expired key still reads the share")
                break
            time.sleep(0.5)
        foreign = os.path.join(work, "foreign.share")
        with open(foreign, "w") as f:
            json.dump({**p, "bearerToken": "svc_live_" + "0" * 64}, f)
        if not refused(foreign, 401):
            failed.append("a key the service never issued was not refused with 401")
        researcher = key_with_profile(binary, server, work, "researcher", "researcher")
        if not refused(researcher, 403):
            failed.append("a Researcher key was not refused with 403 (Delta Sharing needs Power)")
    finally:
        server.stop()
    with open(server.log_path) as f:
        log = f.read()
    if p.get("bearerToken") and p["bearerToken"] in log:
        failed.append("the server log holds a raw key")
    return failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    name = "delta-sharing client: two versions, latest, by timestamp; expired, foreign and researcher keys refused"
    with tempfile.TemporaryDirectory() as work:
        try:
            failed = check(args.bin, work)
        except Exception as e:  # a crash is a failure, reported by name
            failed = [repr(e)]
    print(("FAIL " if failed else "ok   ") + name)
    for f in failed:
        print("     " + f)
    print(f"delta sharing: {int(not failed)} passed, {int(bool(failed))} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
