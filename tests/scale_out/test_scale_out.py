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
   interval (plus the verification of the new objects), and their ETags agree.

Prints 'scale-out: N passed, N failed'.
"""

import argparse
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
from support import Server, create_key, email_sign_in, free_port  # noqa: E402
from test_files_clients import S3  # noqa: E402
from test_signin import Inbox, drop_database, postgres_database  # noqa: E402
from test_stream_client import USER_AGENT, Feed  # noqa: E402

RELOAD = 0.5  # seconds between pointer checks on each replica
CORPUS = "s3://corpus/scale"
MSFT = "/v1/news?cik=789019&as_of=2026-02-05T00:00:00Z"


class Balancer:
    """HAProxy in the foreground, round robin over `backends` per request (idle server
    connections reused), naming the replica that answered in `X-Replica`."""

    def __init__(self, binary, work, backends, port):
        self.port = port
        self.base = f"http://127.0.0.1:{self.port}"
        servers = "\n".join(
            f"  server r{i + 1} 127.0.0.1:{port} check inter 500ms" for i, port in enumerate(backends)
        )
        cfg = os.path.join(work, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(
                f"""global
  maxconn 2000
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  # Keep-alive on both sides: idle connections to a replica are reused (HAProxy's default
  # `http-reuse safe`), so a request costs no new TCP connection to the replica.
  option forwardfor
  # A request whose replica cannot be reached is sent to another (a replica restarting),
  # and so is one sent on a reused connection the replica had closed (killed or restarted):
  # every route this deployment proxies in the checks is a GET.
  retries 3
  retry-on conn-failure empty-response
  option redispatch
frontend fe
  bind 127.0.0.1:{self.port}
  default_backend be
backend be
  balance roundrobin
  option httpchk GET /health
  http-response set-header X-Replica %[srv_name]
{servers}
"""
            )
        self.log = open(os.path.join(work, "haproxy.log"), "w")
        self.proc = subprocess.Popen([binary, "-db", "-f", cfg], stdout=self.log, stderr=subprocess.STDOUT)
        # Ready when both replicas have answered through it (health checks passed).
        deadline = time.monotonic() + 30
        seen = set()
        while seen != {f"r{i + 1}" for i in range(len(backends))}:
            if time.monotonic() > deadline:
                raise RuntimeError(f"HAProxy did not reach every replica: {seen}")
            try:
                r = httpx.get(self.base + "/health", timeout=2)
                if r.status_code == 200 and "x-replica" in r.headers:
                    seen.add(r.headers["x-replica"])
            except httpx.HTTPError:
                pass
            time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


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
            "--trust-forwarded-for",
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
