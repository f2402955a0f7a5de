"""The Python package (`python/`, installed into the test venv by `maturin develop`) against the
real binary: `asof.connect()` to `asof serve` over the shipped sample and `asof.open()` of the
same directory give the same ids in the same order, the same corpus version and the same
exceptions for holes over many drawn cuts (a fresh random seed each run, printed; `--seed N`
replays one), and both equal `asof query`. Then what a notebook relies on: frames and their
dtypes, walks of many pages, instants refused as the service refuses them, time travel.

    python tests/python/test_package.py --bin target/debug/asof [--seed N] [--cuts 200]
"""

import argparse
import datetime as dt
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from support import REPO, Server, create_key  # noqa: E402

import asof  # noqa: E402

CLOCKS = ["published_at", "available_at", "committed_at"]
LANES = ["certified_pit", "forward_first_seen"]
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print(f"FAIL: {what}", flush=True)


def instant(rng):
    start = dt.datetime(2024, 12, 20, tzinfo=dt.timezone.utc)
    span = (dt.datetime(2026, 2, 10, tzinfo=dt.timezone.utc) - start).total_seconds()
    return (start + dt.timedelta(seconds=rng.uniform(0, span))).replace(microsecond=0)


def outcome(api, kind, kw):
    """What one backend answers a cut with: ("ok", version, ids, touched) or ("hole", code,
    missing) or ("error", class, code, param)."""
    try:
        if kind == "diff":
            r = api.diff(**kw)
        else:
            r = api.news(**kw)
        return ("ok", r.corpus_version, [x["id"] for x in r], sorted(r.touched))
    except asof.CoverageMissing as e:
        return ("hole", e.code, e.missing, e.missing_total)
    except asof.AsofError as e:
        return ("error", type(e).__name__, e.code, e.param)


def draw(rng, tickers, ciks, sources):
    """One cut or diff window of a random kind, clock and lane."""
    # Mostly the certified lane inside its span (answers), some of everything else (holes).
    clock = "published_at" if rng.random() < 0.7 else rng.choice(CLOCKS[1:])
    kw = {"visible_by": clock, "lane": "forward_first_seen" if rng.random() < 0.15 else "certified_pit",
          "limit": rng.choice([5, 40, 250])}
    who = rng.random()
    if who < 0.35:
        kw["ticker"] = rng.choice(tickers)
    elif who < 0.6:
        kw["cik"] = rng.choice(ciks)
    elif who < 0.8:
        kw["source"] = rng.choice(sources)
    # else: every sec.edgar row
    if rng.random() < 0.3:
        end = instant(rng)
        start = end - dt.timedelta(days=rng.choice([1, 7, 30, 365]))
        kw.update(as_of_start=start, as_of_end=end)
        return "diff", kw
    kw["as_of"] = instant(rng) if rng.random() < 0.8 else instant(rng).isoformat().replace("+00:00", "Z")
    return "news", kw


def cli_ids(binary, kind, kw):
    """`asof query`'s answer to the same cut: ("ok", ids) or ("hole",) (exit code 3)."""
    args = [binary, "query", "--corpus", REPO, "--format", "json", "--limit", str(min(kw["limit"], 1000))]
    for name, flag in (("ticker", "--ticker"), ("cik", "--cik"), ("source", "--source"),
                       ("visible_by", "--visible-by"), ("lane", "--lane")):
        if kw.get(name) is not None:
            args += [flag, str(kw[name])]
    if kind == "diff":
        args += ["--since", asof._instants.text(kw["as_of_start"]), "--as-of", asof._instants.text(kw["as_of_end"])]
    else:
        args += ["--as-of", asof._instants.text(kw["as_of"])]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode == 3:
        return ("hole",)
    if p.returncode != 0:
        return ("error", p.stderr.strip()[:200])
    return ("ok", [r["id"] for r in json.loads(p.stdout)["results"]])


def differential(binary, base, keys, seed, cuts):
    rng = random.Random(seed)
    local = asof.open(REPO)
    clients = [asof.connect(base, k) for k in keys]
    # Filers the corpus knows: CIKs of rows, and the tickers their identity names.
    rows = local.news(as_of="2026-01-29T12:00:00Z", limit=400).records()
    ciks = sorted({r["cik"] for r in rows if r.get("cik")})
    tickers = {"TSLA", "NOSUCHCO"}
    for cik in ciks[:60]:
        try:
            tickers |= {m["ticker"] for m in local.mapping(cik=cik, as_of="2026-01-29T12:00:00Z")}
        except asof.NotFound:
            pass  # a filer of the daily index without identity evidence
    tickers = sorted(tickers)
    sources = [s["source_id"] for s in local.meta()["corpus"]["sources"]]
    check(len(ciks) > 5 and len(tickers) > 5, f"filers to draw from: {len(ciks)} CIKs, {len(tickers)} tickers")
    kinds = {"ok": 0, "hole": 0, "error": 0}
    for n in range(cuts):
        kind, kw = draw(rng, tickers, ciks, sources)
        over_http = outcome(clients[n % len(clients)], kind, kw)
        in_process = outcome(local, kind, kw)
        kinds[over_http[0]] += 1
        check(over_http == in_process, f"seed {seed} cut {n} {kind} {kw}: http {over_http[:3]} != open {in_process[:3]}")
        if over_http[0] == "ok":
            check(over_http[1] == local.corpus_version, f"cut {n}: version {over_http[1]}")
        if n % 8 == 0 and over_http[0] != "error":
            cli = cli_ids(binary, kind, kw)
            want = ("hole",) if over_http[0] == "hole" else ("ok", over_http[2][:1000])
            check(cli == want, f"seed {seed} cut {n} {kind} {kw}: asof query {cli[:2]} != {want[:2]}")
    print(f"differential: {cuts} cuts (seed {seed}): {kinds}", flush=True)
    check(kinds["ok"] >= cuts // 8 and kinds["hole"] > 0, f"the draw covers answers and holes: {kinds}")


def frames(base, key):
    for api in (asof.connect(base, key), asof.open(REPO)):
        r = api.news(ticker="TSLA", as_of="2026-01-29T12:00:00Z")
        records = r.records()
        table = r.to_arrow()
        check(table.num_rows == len(records) > 0, f"{api!r}: arrow rows {table.num_rows} vs {len(records)}")
        check(str(table.schema.field("published_at").type) == "timestamp[us, tz=UTC]", f"arrow type {table.schema}")
        pdf = r.to_pandas()
        check(str(pdf["published_at"].dtype) == "datetime64[us, UTC]", f"pandas dtype {pdf['published_at'].dtype}")
        check(pdf["available_at"].isna().all(), "certified rows keep available_at null (NaT), never imputed")
        check(list(pdf["id"]) == [x["id"] for x in records], "pandas keeps the answer's order")
        import polars as pl

        pldf = r.to_polars()
        check(pldf.schema["published_at"] == pl.Datetime("us", "UTC"), f"polars dtype {pldf.schema['published_at']}")
        first = records[0]
        check(asof._instants.parse(first["published_at"]) == pdf["published_at"].iloc[0].to_pydatetime(),
              "an instant survives the trip into pandas")
        # A hole is an exception, never an empty frame; an empty answer is an empty frame.
        try:
            api.news(ticker="TSLA", as_of="2099-01-01T00:00:00Z").to_pandas()
            check(False, f"{api!r}: a cut past the certified span raised nothing")
        except asof.CoverageMissing as e:
            check(e.missing and e.status == 409, f"hole: {e.missing}")
        empty = api.news(cik="1", as_of="2026-01-29T12:00:00Z")
        check(empty.records() == [] and empty.to_pandas().shape[0] == 0, "an empty cut is an empty frame")
        check(list(empty.to_pandas().columns) == list(pdf.columns), "an empty frame keeps the columns")


def walks_and_instants(base, key):
    for api in (asof.connect(base, key), asof.open(REPO)):
        whole = [x["id"] for x in api.news(as_of="2026-01-29T12:00:00Z", limit=300)]
        paged = [x["id"] for x in api.news(as_of="2026-01-29T12:00:00Z", limit=300, page_size=17)]
        check(len(whole) == 300 and paged == whole, f"{api!r}: a walk of pages of 17 == one page of 300")
        check([x["id"] for x in api.news(as_of="2026-01-29T12:00:00Z", limit=0)] == [], "limit=0 walks nothing")
        aware = dt.datetime(2026, 1, 29, 13, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
        a = [x["id"] for x in api.news(ticker="TSLA", as_of=aware)]
        b = [x["id"] for x in api.news(ticker="TSLA", as_of="2026-01-29T12:00:00Z")]
        check(a == b and a, "an aware datetime is its instant in UTC")
        for bad in (dt.datetime(2026, 1, 29, 12), dt.date(2026, 1, 29), "2026-01-29T12:00:00+01:00"):
            try:
                api.news(ticker="TSLA", as_of=bad)
                check(False, f"{api!r}: {bad!r} was accepted")
            except asof.InvalidClock as e:
                check(e.param == "as_of" and e.status == 400, f"{bad!r}: {e}")
        try:
            api.news(ticker="TSLA", cik="1318605", as_of="2026-01-29T12:00:00Z")
            check(False, "ticker with cik accepted")
        except asof.InvalidRequest as e:
            check(e.code == "invalid_request", f"ticker and cik: {e}")
        rec = api.record("0001628280-26-003952_1318605", as_of="2026-03-01T00:00:00Z")
        check(rec["cik"] == "1318605", f"record: {rec.get('id')}")
        try:
            api.record("0001628280-26-003952_1318605", as_of="2000-01-01T00:00:00Z")
            check(False, "a record not yet knowable was answered")
        except asof.NotFound:
            pass
        check(api.mapping(ticker="TSLA", as_of="2026-01-29T12:00:00Z")[0]["cik"] == "1318605", "mapping")
        certs = api.coverage("sec.edgar", limit=5).records()
        check(len(certs) == 5 and all("key" in c for c in certs), f"coverage: {certs[:1]}")


def time_travel_and_refusals(base):
    local = asof.open(REPO)
    pinned = asof.open(REPO, version=local.corpus_version)
    check(pinned.corpus_version == local.corpus_version, "a version opens by its corpus_version")
    for bad in (("sha256:" + "0" * 64,), ()):
        try:
            asof.open(*((REPO,) + bad if bad else (os.path.join(tempfile.gettempdir(), "no-corpus-here"),)))
            check(False, f"opened {bad}")
        except asof.CorpusError:
            pass
    try:
        asof.connect(base).news(ticker="TSLA", as_of="2026-01-29T12:00:00Z")
        check(False, "a keyless data call was answered")
    except asof.Unauthorized as e:
        check(e.status == 401, f"keyless: {e}")
    check(asof.connect(base).meta()["corpus"]["corpus_version"] == local.corpus_version, "keyless meta")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--cuts", type=int, default=200)
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    print(f"seed {seed} (replay: --seed {seed})", flush=True)
    with tempfile.TemporaryDirectory() as work:
        server = Server(binary, work)
        try:
            keys = [create_key(binary, server.db, "desk") for _ in range(4)]
            differential(binary, server.base, keys, seed, args.cuts)
            frames(server.base, keys[0])
            walks_and_instants(server.base, keys[1])
            time_travel_and_refusals(server.base)
        finally:
            server.stop()
    if FAILURES:
        print(f"{len(FAILURES)} failure(s); seed {seed}", flush=True)
        sys.exit(1)
    print("python package: all checks passed", flush=True)


if __name__ == "__main__":
    main()
