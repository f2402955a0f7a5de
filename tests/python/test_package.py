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
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.join(TESTS, "stream"))
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


def cli_ids(binary, corpus, kind, kw):
    """`asof query`'s answer to the same cut: ("ok", ids) or ("hole",) (exit code 3)."""
    args = [binary, "query", "--corpus", corpus, "--format", "json", "--limit", str(min(kw["limit"], 1000))]
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


def differential(binary, corpus, base, keys, seed, cuts):
    rng = random.Random(seed)
    local = asof.open(corpus)
    clients = [asof.connect(base, k) for k in keys]
    # Filers the corpus knows: CIKs of rows, and the tickers their identity names.
    rows = local.news(as_of="2026-01-29T12:00:00Z", limit=400).records()
    ciks = sorted({r["cik"] for r in rows if r.get("cik")})
    tickers = {"TSLA", "NOSUCHCO"}
    for cik in ciks[:60]:
        try:
            tickers |= {m["ticker"] for m in local.mapping(cik=cik, as_of="2026-01-29T12:00:00Z")}
        except (asof.NotFound, asof.CoverageMissing):
            pass  # a filer without identity evidence
    tickers = sorted(tickers)
    sources = [s["source_id"] for s in local.meta()["corpus"]["sources"]]
    check(len(ciks) > 5, f"{corpus}: filers to draw from: {len(ciks)} CIKs, {len(tickers)} tickers")
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
            cli = cli_ids(binary, corpus, kind, kw)
            want = ("hole",) if over_http[0] == "hole" else ("ok", over_http[2][:1000])
            check(cli == want, f"seed {seed} cut {n} {kind} {kw}: asof query {cli[:2]} != {want[:2]}")
    print(f"differential over {corpus}: {cuts} cuts (seed {seed}): {kinds}", flush=True)
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


def arrow_equal(base, key):
    """`to_arrow()` gives the same table from both backends (the in-process one made from the
    engine's rows, the HTTP one from JSON), over walks of many pages and limits mid-page."""
    svc, local = asof.connect(base, key), asof.open(REPO)
    for kw in ({"ticker": "TSLA", "as_of": "2026-01-29T12:00:00Z"},
               {"as_of": "2026-01-29T12:00:00Z", "limit": 1234, "page_size": 100},
               {"as_of": "2026-01-29T12:00:00Z", "limit": 50, "page_size": 7},
               {"ticker": "TSLA", "as_of_start": "2026-01-01T00:00:00Z", "as_of_end": "2026-01-29T12:00:00Z", "page_size": 3},
               {"source": "us.ofac.sdn", "as_of": "2019-01-04T23:59:59Z", "limit": 300},
               {"source": "us.fda.enforcement.drug", "as_of": "2024-10-02T23:59:59Z"},
               {"cik": "1", "as_of": "2026-01-29T12:00:00Z"}):
        ask = (lambda api: api.diff(**kw)) if "as_of_start" in kw else (lambda api: api.news(**kw))
        a, b = ask(svc).to_arrow(), ask(local).to_arrow()
        check(a.schema == b.schema, f"{kw}: schemas {a.schema} != {b.schema}")
        for name in a.column_names:
            x, y = a.column(name).to_pylist(), b.column(name).to_pylist()
            if name == "payload":
                x = [None if v is None else json.loads(v) for v in x]
                y = [None if v is None else json.loads(v) for v in y]
            check(x == y, f"{kw}: column {name} differs between the backends")
        check([x["id"] for x in ask(local)] == b.column("id").to_pylist(), f"{kw}: iterating equals the table")
        check(b.num_rows > 0 or kw.get("cik") == "1", f"{kw}: rows to compare")


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


def sql_checks(binary):
    """`asof.open(...).sql`: the engine's SQL, answers equal to `asof sql` and to the API's own
    walks, handed over as Arrow; refusals and holes raise."""
    import pyarrow as pa
    import polars as pl

    local = asof.open(REPO)
    n = local.sql("SELECT count(*) AS n FROM news").to_arrow().column("n")[0].as_py()
    cli = subprocess.run([binary, "sql", "--corpus", REPO, "--format", "csv", "SELECT count(*) AS n FROM news"],
                         capture_output=True, text=True)
    check(cli.returncode == 0 and cli.stdout.split() == ["n", str(n)], f"sql count {n} vs asof sql {cli.stdout!r}")
    for source, as_of, clock in [("sec.edgar", "2026-01-29T12:00:00Z", "published_at"),
                                 ("us.fda.enforcement.drug", "2024-10-02T23:59:59Z", "published_at"),
                                 ("us.ofac.sdn", "2019-01-04T23:59:59Z", "published_at")]:
        walked = sorted(x["id"] for x in local.news(source=source, as_of=as_of, visible_by=clock))
        q = f"SELECT id FROM news_asof('{as_of}', '{clock}', 'certified_pit', '{source}')"
        answered = sorted(local.sql(q).to_arrow().column("id").to_pylist())
        check(walked == answered and walked, f"news_asof {source} {as_of}: {len(answered)} rows, the walk {len(walked)}")
    # The Arrow stream protocol: pyarrow and Polars take the answer as it is.
    r = local.sql("SELECT id, published_at FROM news ORDER BY id LIMIT 50")
    table = pa.table(r)
    check(table.num_rows == 50 and str(table.schema.field("published_at").type) == "timestamp[us, tz=UTC]",
          f"pa.table(sql): {table.schema}")
    check(pl.DataFrame(local.sql("SELECT id FROM news ORDER BY id LIMIT 50"))["id"].to_list()
          == table.column("id").to_pylist(), "polars reads the same answer")
    batches = local.sql("SELECT * FROM news").batches()
    check(sum(b.num_rows for b in batches) == n, "a batch-by-batch read holds every row")
    for bad in ("DROP TABLE news", "SELEC id FROM news", "SELECT nosuchcolumn FROM news"):
        try:
            local.sql(bad).to_arrow()
            check(False, f"{bad!r} ran")
        except asof.SqlError as e:
            check(str(e), f"{bad!r}: an empty message")
    try:
        local.sql("SELECT count(*) FROM news_asof('2099-01-01T00:00:00Z')").to_arrow()
        check(False, "a cut past the certified span counted rows")
    except asof.SqlError as e:
        check("sec.edgar/" in str(e), f"the hole names its keys: {e}")


def audit_checks(base, key):
    """Receipts of an audited walk match the bytes the client kept; a flipped byte or another
    query does not."""
    client = asof.connect(base, key, audit=True)
    r = client.news(ticker="TSLA", as_of="2026-01-29T12:00:00Z", page_size=40, limit=100)
    rows = r.records()
    check(len(rows) == 100 and len(r.responses) == 3, f"audited walk: {len(rows)} rows, {len(r.responses)} pages kept")
    try:
        client.news(ticker="TSLA", as_of="2099-01-01T00:00:00Z")
    except asof.CoverageMissing:
        pass
    want = {x.request_id for x in r.responses}
    deadline = time.monotonic() + 20
    while True:
        receipts = {x["request_id"]: x for x in client.audit_log()}
        if want <= receipts.keys() or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    check(want <= receipts.keys(), f"receipts of {len(want)} pages: {len(want & receipts.keys())} found")
    for page in r.responses:
        rec = receipts.get(page.request_id)
        if rec is None:
            continue
        check(client.verify_receipt(rec, page.body, query=page.query) is True, "a real receipt verifies")
        check(rec["route"] == "GET /v1/news" and rec["corpus_version"] == r.corpus_version, f"receipt {rec}")
        flipped = bytearray(page.body)
        flipped[len(flipped) // 2] ^= 0x01
        for body, query, field in [(bytes(flipped), page.query, "envelope_sha256"),
                                   (page.body, page.query.replace("TSLA", "AAPL"), "params_digest")]:
            try:
                asof.verify_receipt(rec, body, query=query)
                check(False, f"a receipt verified a changed {field}")
            except asof.ReceiptMismatch as e:
                check(e.field == field, f"mismatch named {e.field}, not {field}")
    first, second = r.responses[0], r.responses[1]
    try:
        asof.verify_receipt(receipts[first.request_id], second.body)
        check(False, "a receipt verified another page's bytes")
    except (asof.ReceiptMismatch, KeyError):
        pass
    check(asof.canonical_query("ticker=TSLA&as_of=2026-01-29T12:00:00Z") == "as_of=2026-01-29T12%3A00%3A00Z&ticker=TSLA",
          "the canonical query of docs/audit.md")
    check(asof.params_digest("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "empty digest")
    stats = client.audit_stats()
    check(stats.get("lost") == 0 and stats.get("written", 0) >= 4, f"audit stats {stats}")
    check(asof.connect(base, key).news(ticker="TSLA", as_of="2026-01-29T12:00:00Z").responses == [],
          "an unaudited client keeps no bytes")


def copy_corpus(dst):
    os.makedirs(dst)
    for d in ("manifests", "snapshots"):
        shutil.copytree(os.path.join(REPO, d), os.path.join(dst, d))
    return dst


def files_checks(binary, work, base, key):
    """`download()` writes every partition at its corpus path, sha256-checked; a second run
    fetches nothing; bytes that do not hash to the listing are refused and not kept."""
    import pyarrow.parquet as pq

    client = asof.connect(base, key)
    listing = client.files("us.cftc.cot").records()
    out = os.path.join(work, "download")
    paths = client.download(out, "us.cftc.cot")
    check(len(paths) == len(listing) >= 3, f"downloaded {len(paths)} of {len(listing)}")
    for path, f in zip(paths, listing):
        with open(path, "rb") as fh:
            check(hashlib.sha256(fh.read()).hexdigest() == f["sha256"], f"{path}: sha256")
        check(pq.read_metadata(path).num_rows == f["row_count"], f"{path}: rows")
        check(path.endswith(f["path"].replace("/", os.sep)), f"{path} at its corpus path {f['path']}")
    before = [os.stat(p).st_mtime_ns for p in paths]
    check(client.download(out, "us.cftc.cot") == paths and [os.stat(p).st_mtime_ns for p in paths] == before,
          "a second download keeps the files it has")
    # A deployment whose stored partition has one flipped byte.
    tampered_work = os.path.join(work, "tampered")
    corpus = copy_corpus(os.path.join(tampered_work, "corpus"))
    victim = os.path.join(corpus, *listing[0]["path"].split("/"))
    with open(victim, "r+b") as fh:
        fh.seek(os.path.getsize(victim) // 2)
        b = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([b[0] ^ 0x01]))
    server = Server(binary, tampered_work, corpus=corpus)
    try:
        bad = asof.connect(server.base, create_key(binary, server.db, "power"))
        dst = os.path.join(tampered_work, "download")
        try:
            bad.download(dst, "us.cftc.cot")
            check(False, "a file with a flipped byte was kept")
        except asof.IntegrityError as e:
            check(not os.path.exists(e.path) and e.expected.startswith(listing[0]["sha256"]), f"refused: {e}")
        left = [n for _, _, names in os.walk(dst) for n in names if n.endswith(".part")]
        check(left == [], f"partial downloads left: {left}")
    finally:
        server.stop()


def take(stream, n, timeout=30):
    """`n` records of a stream, read on a thread (a stream that stalls fails the check instead
    of hanging the test)."""
    got, done = [], threading.Event()

    def run():
        try:
            for rec in stream:
                got.append(rec)
                if len(got) == n:
                    break
        except Exception as e:  # reported below
            got.append(e)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    done.wait(timeout)
    return got


def wait_version(base, version, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if asof.connect(base).meta()["corpus"]["corpus_version"] == version:
            return True
        time.sleep(0.1)
    return False


def live_checks(binary, work):
    """A corpus that moves: `stream()` gets what `asof poll` publishes and resumes without
    replays (a new stream from `last_event_id`, and one stream across a server restart); a walk
    across a publish raises CursorExpired; `consistent=True` pins its walk to the first page's
    version; every method takes `corpus_version=`; an audited answer replays after publishes."""
    from test_stream_client import Feed, poll

    live_work = os.path.join(work, "live")
    corpus = copy_corpus(os.path.join(live_work, "corpus"))
    feed = Feed()
    server = Server(binary, live_work, corpus=corpus, extra=["--reload-interval", "1"])
    try:
        key = create_key(binary, server.db, "desk")
        client = asof.connect(server.base, key)
        s = client.stream()
        made = feed.add(2, like=1)
        v = poll(binary, corpus, feed)
        got = take(s, 2)
        check(sorted(r.get("accession") for r in got if isinstance(r, dict)) == sorted(made), f"stream got {got}, poll made {made}")
        check(s.last_event_id and s.last_event_id.startswith(v + ":"), f"last id {s.last_event_id} of {v}")
        last = s.last_event_id
        s.close()
        missed = feed.add(3, like=0)
        poll(binary, corpus, feed)
        s2 = client.stream(last_event_id=last)
        got = take(s2, 3)
        check([r.get("accession") for r in got if isinstance(r, dict)] == sorted(missed, reverse=True)
              or sorted(r.get("accession") for r in got if isinstance(r, dict)) == sorted(missed),
              f"resumed stream got {got}, missed {missed}")
        # One stream across a server restart: it reconnects with Last-Event-ID by itself.
        server.stop()
        server = Server(binary, live_work, corpus=corpus, extra=["--reload-interval", "1"], port=server.port, db=server.db)
        after = feed.add(1, like=2)
        v = poll(binary, corpus, feed)
        got = take(s2, 1)
        check([r.get("accession") for r in got if isinstance(r, dict)] == after and s2.connections >= 2,
              f"after a restart the stream got {got} over {s2.connections} connections, expected {after}")
        s2.close()

        # A walk across a publish.
        walk = client.news(as_of="2026-01-29T12:00:00Z", page_size=20, limit=200)
        it = iter(walk)
        first = [next(it) for _ in range(20)]
        feed.add(1, like=0)
        v = poll(binary, corpus, feed)
        check(wait_version(server.base, v), f"the server loaded {v}")
        try:
            list(it)
            check(False, "a walk across a publish went on")
        except asof.CursorExpired as e:
            check(e.status == 409, f"cursor expired: {e}")

        class Publishing(asof.Client):
            """Publishes (and waits for the server to load it) after the n-th page asked for by
            cursor: a corpus that moves mid-walk, on cue."""

            def __init__(self, times):
                super().__init__(server.base, key)
                self.times = times

            def _send(self, path, query):
                answer = super()._send(path, query)
                if "cursor=" in query and self.times > 0:
                    self.times -= 1
                    feed.add(1, like=1)
                    check(wait_version(server.base, poll(binary, corpus, feed)), "publish loaded")
                return answer

        cut = "2026-01-29T12:00:00Z"
        before = client.meta()["corpus"]["corpus_version"]
        want = [x["id"] for x in client.news(as_of=cut, limit=100)]
        fresh = want
        # An audited answer of this version, kept as a client keeps it, to replay later.
        audited = asof.connect(server.base, key, audit=True)
        kept = audited.news(as_of=cut, limit=5).responses[0]
        r = Publishing(5).news(as_of=cut, page_size=20, limit=100, consistent=True)
        check([x["id"] for x in r] == want and r.corpus_version == before,
              "consistent=True walked the first page's version whole through five publishes")
        check(client.meta()["corpus"]["corpus_version"] != before, "the corpus moved meanwhile")
        # Every method asks the version it is given, after the corpus moved on.
        check([x["id"] for x in client.news(as_of=cut, limit=100, corpus_version=before)] == want,
              "news pinned to the first version")
        check(client.meta(corpus_version=before)["corpus"]["corpus_version"] == before, "meta pinned")
        d = client.diff("2026-01-20T00:00:00Z", cut, corpus_version=before)
        check(d.corpus_version == before, f"diff pinned: {d.corpus_version}")
        c = client.coverage("sec.edgar", date="2026-01-29", corpus_version=before)
        check(c.corpus_version == before, f"coverage pinned: {c.corpus_version}")
        check(client.record(want[0], as_of=cut, corpus_version=before)["id"] == want[0], "record pinned")
        check(client.mapping(as_of=cut, ticker="TSLA", corpus_version=before), "mapping pinned")
        try:
            client.news(as_of=cut, corpus_version="sha256:" + "ab" * 32)
            check(False, "a version never published answered")
        except asof.VersionUnknown as e:
            check(e.status == 404 and e.param == "corpus_version", f"unknown version: {e}")
        # The receipt of the kept answer replays on the version it names.
        receipt = None
        for _ in range(200):
            receipt = audited.receipt(kept.request_id)
            if receipt:
                break
            time.sleep(0.05)
        check(receipt is not None and receipt["corpus_version"] == before, f"the receipt: {receipt}")
        if receipt:
            check(audited.replay(receipt, query=kept.query, body=kept.body) == "bytes", "replayed")
            try:
                audited.replay(receipt, query=kept.query.replace("limit=5", "limit=6"), body=kept.body)
                check(False, "a tampered query replayed")
            except asof.ReceiptMismatch as e:
                check(e.field == "params_digest", f"tampered query: {e.field}")
        check(first and first[0]["id"] == fresh[0], "the first page")
    finally:
        server.stop()
        feed.stop()


def rate_limit_checks(binary, base, db):
    """A key at its limit: RateLimited with the wait (retries=0); waited out by default."""
    key = create_key(binary, db, "researcher")
    url = base + "/v1/news/" + "x?as_of=2026-01-29T12:00:00Z"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    for _ in range(200):
        try:
            urllib.request.urlopen(req, timeout=10).read()
        except urllib.error.HTTPError as e:
            if e.code == 429:
                break
    try:
        asof.connect(base, key, retries=0).record("x", as_of="2026-01-29T12:00:00Z")
        check(False, "a key past its limit was answered")
    except asof.RateLimited as e:
        check(e.retry_after is not None and 0 < e.retry_after <= 60, f"retry_after {e.retry_after}")
    except asof.AsofError:
        pass  # answered (not found): the window turned between the burst and this call
    started = time.monotonic()
    try:
        asof.connect(base, key).record("x", as_of="2026-01-29T12:00:00Z")
    except asof.RateLimited as e:
        check(False, f"the default client did not wait out the limit: {e}")
    except asof.AsofError:
        pass  # answered (not found): the limit was waited out
    print(f"rate limit waited out in {time.monotonic() - started:.1f} s", flush=True)


USER_SCRIPT = """
import datetime as dt
from typing import Dict, List

import asof

svc: asof.Client = asof.connect("http://127.0.0.1:9", "svc_live_x", audit=True)
local: asof.Corpus = asof.open("corpus")
when = dt.datetime(2026, 1, 29, 12, tzinfo=dt.timezone.utc)
r: asof.Result = local.news(ticker="TSLA", as_of=when, visible_by="published_at")
version: str = r.corpus_version
ids: List[str] = [str(x["id"]) for x in r]
pages: List[asof.Response] = r.responses
try:
    local.news(ticker="TSLA", as_of="2099-01-01T00:00:00Z")
except asof.CoverageMissing as e:
    missing: List[str] = e.missing
rec: Dict[str, object] = local.record("id", as_of=when)
ok: bool = svc.verify_receipt({}, b"", query="")
paths: List[str] = svc.download("out", "us.cftc.cot")
for event in svc.stream(cik=1318605):
    print(event["id"])
table = local.sql("SELECT 1").to_arrow()
"""


def typing_check(work):
    """The package's annotations (py.typed) hold a user's script under `mypy --strict`, and
    catch a misuse."""
    good = os.path.join(work, "user_script.py")
    with open(good, "w") as f:
        f.write(USER_SCRIPT)
    bad = os.path.join(work, "user_script_bad.py")
    with open(bad, "w") as f:
        f.write(USER_SCRIPT + "\nnot_a_number: int = r.corpus_version\nasof.open(42)\n")
    runs = []
    for path in (good, bad):
        runs.append(subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", path],
                                   capture_output=True, text=True, cwd=work))
    check(runs[0].returncode == 0, f"mypy --strict on a user script: {runs[0].stdout[-2000:]}")
    check(runs[1].returncode == 1 and "user_script_bad.py:" in runs[1].stdout
          and runs[1].stdout.count("error:") == 2, f"mypy missed the misuse: {runs[1].stdout[-2000:]}")


def bench_differential(binary, work, seed, cuts):
    """The same differential over a small synthetic corpus of `asof bench-corpus` (many filers,
    revisions, uncertified last days, a forward lane)."""
    bench_work = os.path.join(work, "bench")
    corpus = os.path.join(bench_work, "corpus")
    os.makedirs(bench_work)
    subprocess.run([binary, "bench-corpus", "--rows", "20000", "--days", "420", "--ciks", "400",
                    "--seed", str(seed % 1000 + 1), "--forward-days", "30", "--out", corpus],
                   check=True, capture_output=True)
    server = Server(binary, bench_work, corpus=corpus)
    try:
        keys = [create_key(binary, server.db, "desk") for _ in range(2)]
        differential(binary, corpus, server.base, keys, seed, cuts)
    finally:
        server.stop()


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
            limited = threading.Thread(target=rate_limit_checks, args=(binary, server.base, server.db))
            limited.start()  # its wait (up to a minute) overlaps the other checks
            keys = [create_key(binary, server.db, "desk") for _ in range(4)]
            differential(binary, REPO, server.base, keys, seed, args.cuts)
            frames(server.base, keys[0])
            arrow_equal(server.base, keys[3])
            walks_and_instants(server.base, keys[1])
            time_travel_and_refusals(server.base)
            audit_checks(server.base, keys[2])
            files_checks(binary, work, server.base, create_key(binary, server.db, "power"))
            sql_checks(binary)
            typing_check(work)
            live_checks(binary, work)
            bench_differential(binary, work, seed, max(40, args.cuts // 4))
            limited.join()
        finally:
            server.stop()
    if FAILURES:
        print(f"{len(FAILURES)} failure(s); seed {seed}", flush=True)
        sys.exit(1)
    print("python package: all checks passed", flush=True)


if __name__ == "__main__":
    main()
