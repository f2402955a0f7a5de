#!/usr/bin/env python3
"""The live lane end to end, with a server-sent-event client the project does not write.

A local EDGAR feed (this script's own HTTP server, replaying the recorded current-filings Atom
page of `snapshots/sources` and pages derived from it with new filings; it refuses a
User-Agent without a contact, as SEC does) is polled by the real `asof poll --once`, which
publishes into a corpus directory; the real `asof serve` serves that directory and reloads each
new version; `httpx-sse` (a WHATWG-style SSE parser from PyPI) reads `/v1/stream`:

1. a connected client receives exactly the filings of a poll that found new ones, as the same
   record JSON `/v1/news/{id}` answers, with `available_at` at the poll's fetch minute;
2. it disconnects; two more polls publish; it reconnects with `Last-Event-ID` and gets exactly
   the missed events, in order, then the next live one and nothing in between;
3. a stream filtered by `cik`, open all along, got only that filer's records;
4. a malformed `Last-Event-ID` and an undeclared parameter are 400 envelopes.

Prints 'stream clients: N passed, N failed'.
"""

import argparse
import http.server
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import urllib.parse

import httpx
from httpx_sse import connect_sse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
from support import Server, create_key  # noqa: E402

RECORDED = os.path.join(REPO, "snapshots/sources/sec.edgar/current-feed-atom_2026-01-12/start_00000.atom")
USER_AGENT = "asof stream check ops@example.com"


class Feed:
    """EDGAR's `getcurrent` listing on loopback: page 0 is `self.page`, later pages are empty."""

    def __init__(self):
        with open(RECORDED, "rb") as f:
            self.recorded = f.read().decode("iso-8859-1")
        self.entries = re.findall(r"<entry>.*?</entry>", self.recorded, flags=re.S)
        self.head = self.recorded[: self.recorded.index("<entry>")]
        self.extra = []  # derived entries, newest first
        self.serial = 0
        feed = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                url = urllib.parse.urlparse(self.path)
                q = urllib.parse.parse_qs(url.query)
                if "@" not in self.headers.get("User-Agent", ""):
                    return self.answer(403, b"a contact is required in the User-Agent")
                if url.path != "/cgi-bin/browse-edgar" or q.get("action") != ["getcurrent"]:
                    return self.answer(404, b"not here")
                start = int(q.get("start", ["0"])[0])
                body = feed.page() if start == 0 else feed.head + "</feed>\n"
                self.answer(200, body.encode("iso-8859-1"), "application/atom+xml")

            def answer(self, status, body, ctype="text/plain"):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def page(self):
        return self.head + "\n".join(self.extra + self.entries) + "\n</feed>\n"

    def add(self, n, like=0):
        """Adds `n` filings EDGAR never issued, each a copy of recorded entry `like` under a new
        accession number; returns their accession numbers."""
        entry = self.entries[like]
        acc = re.search(r"accession-number=([0-9-]+)", entry).group(1)
        made = []
        for _ in range(n):
            self.serial += 1
            new = f"0009999999-26-{self.serial:06d}"
            self.extra.insert(0, entry.replace(acc, new).replace(acc.replace("-", ""), new.replace("-", "")))
            made.append(new)
        return made

    def cik_of(self, like):
        return re.search(r"\((\d{10})\)", self.entries[like]).group(1)

    def stop(self):
        self.httpd.shutdown()


def poll(binary, corpus, feed):
    out = subprocess.run(
        [binary, "poll", "--once", "--corpus", corpus, "--user-agent", USER_AGENT, "--edgar-base-url", feed.base],
        check=True, capture_output=True, text=True,
    )
    return out.stdout.strip()


class Reader:
    """One SSE connection read on its own thread: its events arrive on a queue. It reads until
    it has `stop_after` events (then leaves the context, which closes the connection) or the
    server ends the stream."""

    def __init__(self, url, key, last_id=None, stop_after=None):
        self.events = queue.Queue()
        self.opened = threading.Event()
        self.error = None
        headers = {"Authorization": f"Bearer {key}"}
        if last_id:
            headers["Last-Event-ID"] = last_id

        def run():
            try:
                with httpx.Client(timeout=httpx.Timeout(60.0)) as client:
                    with connect_sse(client, "GET", url, headers=headers) as source:
                        source.response.raise_for_status()
                        ctype = source.response.headers["content-type"]
                        if not ctype.startswith("text/event-stream"):
                            raise RuntimeError(f"content type {ctype}")
                        self.opened.set()
                        seen = 0
                        for sse in source.iter_sse():
                            # A message without data (the opening `retry:` field) is not
                            # dispatched as an event by a WHATWG client; httpx-sse yields it.
                            if not sse.data:
                                continue
                            self.events.put(sse)
                            seen += 1
                            if stop_after is not None and seen >= stop_after:
                                return
            except Exception as e:  # reported by the check that waits on it
                self.error = e
                self.opened.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        if not self.opened.wait(30):
            raise RuntimeError("the stream did not open within 30 s")
        if self.error:
            raise self.error

    def next(self, wait=30):
        try:
            return self.events.get(timeout=wait)
        except queue.Empty:
            raise RuntimeError(f"no event within {wait} s (reader error: {self.error!r})")

    def take(self, n):
        return [self.next() for _ in range(n)]


def news_record(server, key, rec):
    q = urllib.parse.urlencode({"as_of": rec["available_at"], "visible_by": "available_at"})
    r = httpx.get(f"{server.base}/v1/news/{rec['id']}?{q}", headers={"Authorization": f"Bearer {key}"})
    r.raise_for_status()
    return r.json()["results"][0]


def check_live(binary, work):
    failed = []
    feed = Feed()
    corpus = os.path.join(work, "corpus")
    first = poll(binary, corpus, feed)  # the corpus starts with the recorded page
    if not first.startswith("sha256:"):
        return [f"the first poll published nothing: {first!r}"]
    server = Server(binary, work, corpus=corpus, extra=["--reload-interval", "1"])
    try:
        key = create_key(binary, server.db, "researcher")
        url = f"{server.base}/v1/stream"
        watched = feed.cik_of(0)
        by_cik = Reader(f"{url}?cik={watched.lstrip('0')}", key)
        client = Reader(url, key, stop_after=2)

        # 1. One poll with two new filings: exactly two events, as /v1/news answers them.
        made = feed.add(2, like=1)
        v2 = poll(binary, corpus, feed)
        got = client.take(2)
        accs = sorted(json.loads(e.data)["accession"] for e in got)
        if accs != sorted(made):
            failed.append(f"the events carry {accs}, the poll found {made}")
        for e in got:
            rec = json.loads(e.data)
            if e.event != "record" or not e.id.startswith(v2 + ":"):
                failed.append(f"event {e.event} id {e.id} does not name version {v2}")
            if rec["availability_basis"] != "local_first_seen" or not rec["available_at"].endswith(":00Z"):
                failed.append(f"not a first-seen row at a fetch minute: {rec}")
            if news_record(server, key, rec) != rec:
                failed.append(f"the stream's record differs from /v1/news/{rec['id']}")
        client.thread.join(10)  # it read its two events and closed the connection
        last_id = got[-1].id

        # 2. Missed while disconnected: two polls; reconnecting replays exactly those.
        missed = feed.add(3, like=0) + feed.add(1, like=2)
        poll(binary, corpus, feed)
        # Between the two publishes the server may or may not have loaded the first: either
        # way the replay walks the manifest chain, so each event keeps its version's id.
        missed_2 = feed.add(1, like=0)
        poll(binary, corpus, feed)
        again = Reader(url, key, last_id=last_id)
        replay = again.take(len(missed) + len(missed_2))
        accs = [json.loads(e.data)["accession"] for e in replay]
        if sorted(accs) != sorted(missed + missed_2):
            failed.append(f"replay after {last_id} gave {accs}, missed were {missed + missed_2}")
        if len({e.id for e in replay}) != len(replay):
            failed.append("a replayed event came twice")
        live = feed.add(1, like=1)
        v5 = poll(binary, corpus, feed)
        nxt = again.next()
        if json.loads(nxt.data)["accession"] != live[0] or not nxt.id.startswith(v5 + ":"):
            failed.append(f"after the replay the next event is {nxt.id}, not the live filing {live[0]}")

        # 3. The cik-filtered stream saw only its filer (entries copied from entry 0).
        own = []
        while True:
            try:
                own.append(json.loads(by_cik.events.get(timeout=2).data))
            except queue.Empty:
                break
        want = {a for a in missed[:3] + missed_2}
        if {r["accession"] for r in own} != want or any(r["cik"].lstrip("0") != watched.lstrip("0") for r in own):
            failed.append(f"the cik={watched} stream got {[r['accession'] for r in own]}, expected {sorted(want)}")

        # 4. Refusals are envelopes.
        for headers, query, param in [
            ({"Last-Event-ID": "42"}, "", "Last-Event-ID"),
            ({}, "?since=1", "since"),
        ]:
            r = httpx.get(url + query, headers={"Authorization": f"Bearer {key}", **headers})
            body = r.json()
            if r.status_code != 400 or body["error"]["param"] != param or body["count"] is not None:
                failed.append(f"{query or headers} answered {r.status_code} {body}")
        return failed
    finally:
        server.stop()
        feed.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    results = {}
    name = "httpx-sse: a poll's filings arrive live; Last-Event-ID replays exactly the missed"
    with tempfile.TemporaryDirectory() as work:
        try:
            results[name] = check_live(args.bin, work)
        except Exception as e:  # a crash is a failure, reported by name
            results[name] = [repr(e)]
    passed = sum(1 for v in results.values() if not v)
    for k, v in results.items():
        print(("ok   " if not v else "FAIL ") + k)
        for line in v:
            print("     " + line)
    print(f"stream clients: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
