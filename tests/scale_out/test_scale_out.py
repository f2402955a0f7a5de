#!/usr/bin/env python3
"""Scale-out, run whole: two `asof serve` replicas behind HAProxy (Debian's package, round
robin, a new connection per request), one PostgreSQL state database (a fresh database on the
machine's server), the corpus in S3 (s3s-fs on loopback, seeded with the shipped sample), and
`asof poll` publishing into that bucket. Every check goes through the load balancer, which
names the replica that answered (`X-Replica`), or to the replicas directly when it must:

1. a keyset cursor walk whose pages alternate between replicas equals one large page;
2. the same URL answered by each replica has the same bytes and the same ETag;
3. a researcher key's rate limit holds across replicas within the documented bound
   (limit + (replicas - 1) x margin, the margin a tenth of the limit);
4. a key revoked through one replica is refused by both within 5 s;
5. a file URL one replica signs is served by the other (a pair over a local corpus directory,
   the case where the service signs its own URLs; with S3 the store presigns them);
6. after the poller publishes, both replicas serve the new version within the reload
   interval (plus the verification of the new objects), and their ETags agree;
7. a replica sent SIGTERM drains: /ready turns 503, HAProxy takes it out before its listener
   closes, no request fails, and started again it is taken back;
8. a real Prometheus on deploy/prometheus/ scrapes the replicas, sees their versions agree
   after a publish, and fires the diverging-versions alert for a replica whose reloads stopped.

HAProxy and Prometheus run on the files in deploy/, so what passes here is what an operator
installs.

Prints 'scale-out: N passed, N failed'.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.parse
import uuid

import httpx
from aiosmtpd.controller import Controller

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "tests", "files"))
sys.path.insert(0, os.path.join(REPO, "tests", "stream"))
sys.path.insert(0, os.path.join(REPO, "tests", "accounts"))
from support import Balancer, Server, create_key, email_sign_in, free_port  # noqa: E402
from test_files_clients import S3  # noqa: E402
from test_signin import Inbox, drop_database, postgres_database  # noqa: E402
from test_stream_client import USER_AGENT, Feed  # noqa: E402

RELOAD = 0.5  # seconds between pointer checks on each replica
DRAIN = 5  # seconds a replica keeps serving after SIGTERM with /ready at 503
CORPUS = "s3://corpus/scale"
MSFT = "/v1/news?cik=789019&as_of=2026-02-05T00:00:00Z"


def get(base, path, key=None, **kw):
    headers = kw.pop("headers", {})
    if key:
        headers["Authorization"] = f"Bearer {key}"
    headers["Connection"] = "close"
    return httpx.get(base + path, headers=headers, timeout=30, **kw)


def ids(res):
    return [r["id"] for r in res.json()["results"]]


class Deployment:
    def __init__(self, binary, s3s, haproxy, work, pg_url, log="info"):
        self.binary = binary
        self.work = work
        self.db = pg_url
        self.s3 = S3(s3s, os.path.join(work, "s3"))
        # The shipped sample as the bucket's starting corpus: s3s-fs keeps objects as files.
        root = os.path.join(work, "s3", "corpus", "scale")
        shutil.copytree(os.path.join(REPO, "manifests"), os.path.join(root, "manifests"))
        shutil.copytree(
            os.path.join(REPO, "snapshots"),
            os.path.join(root, "snapshots"),
            ignore=lambda d, names: ["sources"] if os.path.samefile(d, os.path.join(REPO, "snapshots")) else [],
        )
        self.env = {**self.s3.env, "ASOF_PUBLISH_LOCK": os.path.join(work, "publish.lock")}
        self.inbox = Inbox()
        self.smtp = Controller(self.inbox, hostname="127.0.0.1", port=free_port())
        self.smtp.start()
        lb_port = free_port()
        self.lb_base = f"http://127.0.0.1:{lb_port}"
        self.extra = extra = [
            "--reload-interval", str(RELOAD),
            # As deploy/systemd/asof.env: /ready at 503 for a while after SIGTERM, longer than
            # HAProxy's two failed checks a second apart.
            "--drain-delay", str(DRAIN),
            "--metrics-listen", "127.0.0.1:0",
            # HAProxy reaches the replicas from loopback: only it may say who the client is.
            "--trusted-proxy", "127.0.0.1",
            "--smtp-url", f"smtp://127.0.0.1:{self.smtp.port}",
            "--mail-from", "asof <no-reply@asof.test>",
            "--public-url", self.lb_base,
            "--insecure-cookies",
        ]
        self.replicas = [
            Server(binary, work, corpus=CORPUS, extra=extra, env={**self.env, "ASOF_LOG": log}, db=pg_url)
            for _ in range(2)
        ]
        self.lb = Balancer(haproxy, work, [r.port for r in self.replicas], lb_port)
        self.feed = Feed()

    @property
    def base(self):
        return self.lb.base

    def current_version(self):
        return get(self.base, "/health").json()["results"][0]["corpus_version"]

    def poll(self):
        out = subprocess.run(
            [self.binary, "poll", "--once", "--corpus", CORPUS, "--user-agent", USER_AGENT,
             "--edgar-base-url", self.feed.base],
            check=True, capture_output=True, text=True, env={**os.environ, **self.env},
        )
        return out.stdout.strip().splitlines()[-1]

    def stop(self):
        # Every replica drains at once (each takes DRAIN seconds after SIGTERM).
        for r in self.replicas:
            if r.proc.poll() is None:
                r.proc.terminate()
        for r in self.replicas:
            r.stop()
        self.lb.stop()
        self.smtp.stop()
        self.feed.stop()
        self.s3.stop()


def check_cursor_walk(d, key):
    whole = get(d.base, MSFT + "&limit=1000", key)
    assert whole.status_code == 200, whole.text
    expected = ids(whole)
    walked, replicas, cursor = [], [], None
    while True:
        q = MSFT + "&limit=3" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else "")
        r = get(d.base, q, key)
        assert r.status_code == 200, r.text
        replicas.append(r.headers["x-replica"])
        walked += ids(r)
        cursor = r.json()["next_cursor"]
        if not cursor:
            break
    failed = []
    if len(replicas) < 3 or set(replicas) != {"r1", "r2"}:
        failed.append(f"the pages did not alternate between replicas: {replicas}")
    if walked != expected:
        failed.append(f"the walk gave {len(walked)} rows, one page {len(expected)}")
    return failed


def check_same_answer(d, key):
    a = get(d.base, MSFT + "&limit=10", key)
    b = get(d.base, MSFT + "&limit=10", key)
    failed = []
    if {a.headers["x-replica"], b.headers["x-replica"]} != {"r1", "r2"}:
        failed.append("both requests went to one replica")
    if a.headers["etag"] != b.headers["etag"]:
        failed.append(f"ETags differ: {a.headers['etag']} / {b.headers['etag']}")
    ja, jb = a.json(), b.json()
    for j in (ja, jb):
        j.pop("request_id")
    if ja != jb:
        failed.append("the two replicas' answers differ beyond the request id")
    # A conditional request with one replica's ETag is a 304 at the other.
    c = get(d.base, MSFT + "&limit=10", key, headers={"If-None-Match": a.headers["etag"]})
    if c.status_code != 304:
        failed.append(f"If-None-Match with the other replica's ETag: {c.status_code}")
    return failed


def check_rate_limit(d):
    key = create_key(d.binary, d.db, "researcher")
    limit, margin, replicas = 60, 6, 2
    # One fixed window: start early in a minute.
    if time.time() % 60 > 30:
        time.sleep(60 - time.time() % 60 + 0.2)
    statuses, by_replica = [], {}
    for _ in range(limit + 20):
        r = get(d.base, "/v1/news?cik=789019&as_of=2026-02-05T00:00:00Z&limit=1", key)
        statuses.append(r.status_code)
        by_replica.setdefault(r.headers.get("x-replica"), 0)
        by_replica[r.headers.get("x-replica")] += 1
    ok = statuses.count(200)
    failed = []
    if set(statuses) - {200, 429}:
        failed.append(f"statuses other than 200/429: {sorted(set(statuses))}")
    if not (limit <= ok <= limit + (replicas - 1) * margin):
        failed.append(f"{ok} requests let through; the bound is {limit}..{limit + (replicas - 1) * margin}")
    if len(by_replica) != 2:
        failed.append(f"one replica took every request: {by_replica}")
    return failed


def check_revocation(d):
    address = f"ops-{uuid.uuid4().hex[:8]}@example.com"
    _, _, cookie = email_sign_in(d.base, address, d.inbox)
    cookie = cookie.split(";")[0]
    r = httpx.post(d.base + "/v1/keys", json={"name": "scale"}, timeout=10,
                   headers={"cookie": cookie, "origin": d.base})
    assert r.status_code in (200, 201), r.text
    created = r.json()["results"][0]
    key, key_id = created["secret"], created["id"]
    direct = [r.base for r in d.replicas]
    path = "/v1/news?cik=789019&as_of=2026-02-05T00:00:00Z&limit=1"
    failed = []
    for b in direct:
        if get(b, path, key).status_code != 200:
            failed.append(f"the new key does not work on {b}")
    r = httpx.delete(d.base + f"/v1/keys/{key_id}", timeout=10, headers={"cookie": cookie, "origin": d.base})
    assert r.status_code == 200, r.text
    revoked_at = time.monotonic()
    refused = {}
    while len(refused) < len(direct) and time.monotonic() - revoked_at < 10:
        for b in direct:
            if b not in refused and get(b, path, key).status_code == 401:
                refused[b] = time.monotonic() - revoked_at
        time.sleep(0.1)
    for b in direct:
        took = refused.get(b)
        if took is None or took > 5:
            failed.append(f"{b} still took the revoked key after {took or '10+'} s")
    return failed


def check_signed_url_across_replicas(d):
    # The service signs its own URLs for a local corpus: a pair over the shipped sample,
    # sharing the state database (and so the signing secret).
    pair = [Server(d.binary, d.work, extra=["--reload-interval", "60"], db=d.db) for _ in range(2)]
    try:
        key = create_key(d.binary, d.db, "power")
        r = get(pair[0].base, "/v1/files?limit=1", key)
        assert r.status_code == 200, r.text
        f = r.json()["results"][0]
        if f["url_kind"] == "presigned":
            return ["a local corpus gave a presigned URL"]
        url = f["url"]
        mine = httpx.get(url, timeout=30)
        other = httpx.get(url.replace(pair[0].base, pair[1].base), timeout=30)
        failed = []
        if pair[0].base not in url:
            failed.append(f"the URL does not name the replica that signed it: {url}")
        if mine.status_code != 200 or other.status_code != 200:
            failed.append(f"signed URL: {mine.status_code} from the signer, {other.status_code} from the other")
        elif mine.content != other.content or len(mine.content) != f["bytes"]:
            failed.append("the two replicas served different bytes")
        return failed
    finally:
        for s in pair:
            s.stop()


def check_convergence(d, key):
    before = get(d.base, "/health").json()["results"][0]["corpus_version"]
    d.feed.add(3)
    version = d.poll()
    published = time.monotonic()
    failed = []
    if not version.startswith("sha256:") or version == before:
        return [f"the poll published nothing: {version!r}"]
    direct = [r.base for r in d.replicas]
    converged = {}
    while len(converged) < 2 and time.monotonic() - published < 30:
        for b in direct:
            if b not in converged and get(b, "/health").json()["results"][0]["corpus_version"] == version:
                converged[b] = time.monotonic() - published
        time.sleep(0.02)
    bound = RELOAD + 3.0  # one pointer check, plus reading and verifying the new objects
    for b in direct:
        took = converged.get(b)
        if took is None or took > bound:
            failed.append(f"{b} served {version} after {took} s (bound {bound} s)")
    tags = [get(b, MSFT + "&limit=5", key) for b in direct]
    if len({t.headers["etag"] for t in tags}) != 1:
        failed.append(f"ETags differ after the publish: {[t.headers['etag'] for t in tags]}")
    if {t.headers["x-corpus-version"] for t in tags} != {version}:
        failed.append(f"versions served: {[t.headers['x-corpus-version'] for t in tags]}")
    return failed


def check_drain(d, key):
    """SIGTERM to one replica while requests flow through HAProxy: its /ready turns 503, HAProxy
    (deploy/haproxy/haproxy.cfg: two failed checks a second apart) takes it out, and only then,
    DRAIN seconds after the signal, does its listener close; started again on the same port it
    is taken back. No request fails, and none reaches the replica in its last second."""
    import threading

    keys = [create_key(d.binary, d.db, "desk") for _ in range(4)]
    seen, stop = [], threading.Event()

    def load():
        i = 0
        with httpx.Client(timeout=10) as c:
            while not stop.is_set():
                i += 1
                try:
                    r = c.get(d.base + MSFT + "&limit=1", headers={"Authorization": f"Bearer {keys[i % 4]}"})
                    seen.append((time.monotonic(), r.status_code, r.headers.get("x-replica")))
                except httpx.HTTPError as e:
                    seen.append((time.monotonic(), repr(e), None))
                time.sleep(0.05)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    time.sleep(1.5)
    victim = d.replicas[0]
    signalled = time.monotonic()
    victim.proc.terminate()
    victim.proc.wait(timeout=30)
    exited = time.monotonic()
    victim.log.close()
    d.replicas[0] = Server(d.binary, d.work, corpus=CORPUS, extra=d.extra, env={**d.env, "ASOF_LOG": "info"},
                           db=d.db, port=victim.port)
    restarted = time.monotonic()
    deadline = restarted + 30
    while time.monotonic() < deadline and not any(t > restarted and rep == "r1" for t, _, rep in list(seen)):
        time.sleep(0.1)
    stop.set()
    thread.join(timeout=15)
    failed = []
    if exited - signalled < DRAIN - 0.2:
        failed.append(f"the replica exited {exited - signalled:.1f} s after SIGTERM, before its drain delay")
    bad = [(round(t - signalled, 2), st) for t, st, _ in seen if st != 200]
    if bad:
        failed.append(f"requests failed (s after SIGTERM, status): {bad[:10]}")
    late = [round(t - signalled, 2) for t, _, rep in seen if rep == "r1" and exited - 1.0 < t < exited]
    if late:
        failed.append(f"HAProxy still sent to the draining replica in its last second: {late}")
    if not any(t > restarted and rep == "r1" for t, _, rep in seen):
        failed.append("the restarted replica was not taken back within 30 s")
    if len(seen) < 50:
        failed.append(f"only {len(seen)} requests were sent")
    return failed


def metrics_address(server):
    with open(server.log_path) as f:
        for line in f:
            if "asof metrics on http://" in line:
                return line.split("asof metrics on http://")[1].split("/")[0]
    raise RuntimeError(f"no metrics address in {server.log_path}")


def check_prometheus(d, key):
    """A real Prometheus on deploy/prometheus/ (its rules file unchanged; the scrape and
    evaluation intervals shortened to a second) scrapes both replicas and a third one whose
    reloads are stopped (a pointer check a day apart, not behind the balancer). Its query API
    gives the request counters; after a publish the two replicas' `asof_corpus_info` name the
    same new version; and the rule on diverging versions fires."""
    prometheus = shutil.which("prometheus")
    if not prometheus:
        return ["Debian's prometheus is not installed (scripts/test-all installs it)"]
    extra = list(d.extra)
    extra[extra.index("--reload-interval") + 1] = "86400"
    stuck = Server(d.binary, d.work, corpus=CORPUS, extra=extra, env={**d.env, "ASOF_LOG": "info"}, db=d.db)
    work = os.path.join(d.work, "prometheus")
    os.makedirs(os.path.join(work, "targets"))
    src = os.path.join(REPO, "deploy", "prometheus")
    with open(os.path.join(src, "prometheus.yml")) as f:
        cfg = f.read()
    for k in ("scrape_interval", "evaluation_interval"):
        assert f"{k}: 15s" in cfg, f"deploy/prometheus/prometheus.yml no longer sets {k}: 15s"
        cfg = cfg.replace(f"{k}: 15s", f"{k}: 1s")
    with open(os.path.join(work, "prometheus.yml"), "w") as f:
        f.write(cfg)
    shutil.copy(os.path.join(src, "asof.rules.yml"), work)
    replicas = {"r1": d.replicas[0], "r2": d.replicas[1], "stuck": stuck}
    with open(os.path.join(work, "targets", "asof.json"), "w") as f:
        json.dump([{"targets": [metrics_address(s)], "labels": {"replica": n}} for n, s in replicas.items()], f)
    with open(os.path.join(work, "targets", "asof-poll.json"), "w") as f:
        json.dump([], f)
    port = free_port()
    api = f"http://127.0.0.1:{port}/api/v1"
    log = open(os.path.join(d.work, "prometheus.log"), "w")
    proc = subprocess.Popen([prometheus, f"--config.file={work}/prometheus.yml", f"--storage.tsdb.path={work}/data",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT)

    def query(q):
        r = httpx.get(api + "/query", params={"query": q}, timeout=5)
        r.raise_for_status()
        return r.json()["data"]["result"]

    def wait(what, cond, within):
        deadline = time.monotonic() + within
        last = None
        while time.monotonic() < deadline:
            try:
                last = cond()
                if last:
                    return last
            except (httpx.HTTPError, KeyError, ValueError) as e:
                last = repr(e)
            time.sleep(0.25)
        raise AssertionError(f"{what} within {within} s; last: {last}")

    failed = []
    try:
        wait("three replicas scraped", lambda: len(query('up{job="asof"} == 1')) == 3, 30)
        get(d.base, MSFT, key)
        counted = wait("request counters", lambda: query('sum by (replica) (asof_http_requests_total{job="asof"})'), 15)
        if {c["metric"]["replica"] for c in counted} < {"r1", "r2"}:
            failed.append(f"request counters of {[c['metric'] for c in counted]}")
        d.feed.add(2)
        version = d.poll()
        published = time.monotonic()

        def both_on_new():
            rows = query('asof_corpus_info{replica=~"r1|r2"}')
            return len(rows) == 2 and {r["metric"]["corpus_version"] for r in rows} == {version}

        wait("both replicas' asof_corpus_info on the new version", both_on_new, 20)
        stuck_rows = query('asof_corpus_info{replica="stuck"}')
        if [r["metric"]["corpus_version"] for r in stuck_rows] == [version]:
            failed.append("the replica with stopped reloads took the new version")

        def firing():
            r = httpx.get(api + "/alerts", timeout=5).json()["data"]["alerts"]
            return [a for a in r if a["labels"]["alertname"] == "AsofReplicasServeDifferentVersions"
                    and a["state"] == "firing"]

        wait("AsofReplicasServeDifferentVersions firing", firing, 90)
        print(f"     diverging-versions alert fired {time.monotonic() - published:.0f} s after the publish")
    except AssertionError as e:
        failed.append(str(e))
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
        stuck.stop()
    return failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--s3s-fs", default=os.environ.get("ASOF_S3S_FS"))
    ap.add_argument("--haproxy", default=shutil.which("haproxy"))
    args = ap.parse_args()
    required = os.environ.get("CI") == "true"
    missing = [n for n, v in (("s3s-fs", args.s3s_fs), ("haproxy", args.haproxy)) if not v or not os.path.exists(v)]
    name, pg_url = postgres_database()
    if pg_url is None:
        missing.append("PostgreSQL")
    if missing:
        print(f"scale-out: skipped (missing {', '.join(missing)})")
        return 1 if required else 0
    results = {}
    with tempfile.TemporaryDirectory(prefix="asof-scale-") as work:
        d = None
        try:
            d = Deployment(args.bin, args.s3s_fs, args.haproxy, work, pg_url)
            key = create_key(args.bin, pg_url, "desk")
            checks = [
                ("a cursor walk alternating replicas equals one page", lambda: check_cursor_walk(d, key)),
                ("both replicas give the same bytes and ETag; If-None-Match crosses replicas",
                 lambda: check_same_answer(d, key)),
                ("a rate limit holds across replicas within limit + (N-1) x margin", lambda: check_rate_limit(d)),
                ("a key revoked through one replica is refused by both within 5 s", lambda: check_revocation(d)),
                ("a file URL signed by one replica is served by the other",
                 lambda: check_signed_url_across_replicas(d)),
                ("after a publish both replicas converge within the reload interval, ETags agree",
                 lambda: check_convergence(d, key)),
                ("a draining replica is taken out by HAProxy before its listener closes; no request fails",
                 lambda: check_drain(d, key)),
                ("Prometheus scrapes the replicas; versions agree after a publish; a stuck replica fires the alert",
                 lambda: check_prometheus(d, key)),
            ]
            for label, check in checks:
                try:
                    results[label] = check()
                except Exception:
                    results[label] = [traceback.format_exc(limit=3)]
        except Exception:
            results["deployment starts"] = [traceback.format_exc(limit=5)]
        finally:
            if d is not None:
                d.stop()
                # No secret in any log line of the deployment.
                for fn in os.listdir(work):
                    if fn.endswith(".log"):
                        with open(os.path.join(work, fn), errors="replace") as f:
                            text = f.read()
                        if "svc_live_" in text or "asof-test-secret" in text:
                            results.setdefault("no secret in any log", []).append(fn)
                results.setdefault("no secret in any log", [])
    drop_database(name)
    passed = sum(1 for v in results.values() if not v)
    for k, v in results.items():
        print(("ok   " if not v else "FAIL ") + k)
        for line in v:
            print("     " + line)
    print(f"scale-out: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
