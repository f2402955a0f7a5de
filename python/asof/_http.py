"""``asof.connect``: the API over HTTP to a deployment (the standard library's ``urllib`` only),
with what only a deployment offers: flat files (``files``, ``download``), the live stream
(``stream``) and decision audit receipts (``audit_log``, ``verify_receipt``).

Repeated pages are asked for with ``If-None-Match`` and a ``304`` answered from the ETags kept
in memory; a ``429`` is waited out (``Retry-After``) and retried, a bounded number of times."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import OrderedDict
import datetime as _dt
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from . import _audit, _files
from ._api import PAGE_MAX, Answer, Api, Result, encode
from ._errors import StreamGap
from ._stream import IDLE_TIMEOUT, Stream, _seconds

#: Pages kept for ``If-None-Match`` (their ETag and bytes), least recently used dropped first.
ETAG_PAGES = 256


class Client(Api):
    """A deployment of the service at ``base_url``. Without ``key`` only the public routes
    answer (``/v1/meta``; the data routes say ``Unauthorized``).

    With ``audit=True`` every request asks for a decision audit receipt (``X-Service-Audit``;
    Desk plan) and every result keeps the pages exactly as sent (``Result.responses``), to be
    checked later against the receipts with :meth:`verify_receipt`."""

    def __init__(
        self,
        base_url: str,
        key: Optional[str] = None,
        *,
        timeout: float = 60.0,
        retries: int = 3,
        max_wait: float = 60.0,
        user_agent: str = "asof-python",
        audit: bool = False,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.audit = audit
        self._keep_responses = audit
        self._key = key
        self.timeout = timeout
        self.retries = retries
        self.max_wait = max_wait
        self.user_agent = user_agent
        self._etags: "OrderedDict[str, Tuple[str, bytes]]" = OrderedDict()

    def __repr__(self) -> str:
        return f"<asof.Client {self.base_url}>"

    def _request(self, url: str, audit: bool) -> Tuple[int, Dict[str, str], bytes]:
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        if audit:
            headers["X-Service-Audit"] = "on"
        # An audited request is never answered from the cache: a 304 is not receipted, and the
        # receipt must name bytes the caller holds.
        cached = None if audit else self._etags.get(url)
        if cached is not None:
            headers["If-None-Match"] = cached[0]
        req = urllib.request.Request(url, headers=headers, method="GET")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                status, got, body = res.status, dict(res.headers.items()), res.read()
        except urllib.error.HTTPError as e:
            status, got, body = e.code, dict(e.headers.items()), e.read()
        got = {k.lower(): v for k, v in got.items()}
        if status == 304 and cached is not None:
            self._etags.move_to_end(url)
            return 200, got, cached[1]
        etag = got.get("etag")
        if status == 200 and etag:
            self._etags[url] = (etag, body)
            self._etags.move_to_end(url)
            while len(self._etags) > ETAG_PAGES:
                self._etags.popitem(last=False)
        return status, got, body

    def _send(self, path: str, query: str) -> Answer:
        return self._get(path, query, self.audit)

    def _get(self, path: str, query: str, audit: bool) -> Answer:
        url = self.base_url + path + ("?" + query if query else "")
        attempt = 0
        while True:
            status, headers, body = self._request(url, audit)
            retry_after = _seconds(headers.get("retry-after"))
            if status == 429 and attempt < self.retries:
                attempt += 1
                time.sleep(min(self.max_wait, retry_after if retry_after is not None else 1.0))
                continue
            try:
                envelope = json.loads(body)
            except ValueError:
                envelope = {"error": {"code": "not_json", "message": body[:200].decode("utf-8", "replace")}}
            return Answer(status, envelope, retry_after, body, headers.get("x-request-id"))

    # -- flat files ---------------------------------------------------------------------------

    def files(
        self,
        source: Optional[str] = None,
        *,
        from_: Optional[Union[str, _dt.date]] = None,
        to: Optional[Union[str, _dt.date]] = None,
        limit: Optional[int] = None,
        page_size: int = PAGE_MAX,
    ) -> Result:
        """The Parquet partitions of the deployment's corpus version (Power plan): one file
        object per source-lane-day (``path``, ``sha256``, ``bytes``, ``row_count``,
        ``certified``, a signed ``url``), of ``source`` and the days ``from_``..``to`` if
        given."""
        params = {
            "source": source,
            "from": None if from_ is None else str(from_),
            "to": None if to is None else str(to),
        }
        return Result(self, "/v1/files", params, limit, page_size, True)

    def download(
        self,
        directory: str,
        source: Optional[str] = None,
        *,
        from_: Optional[Union[str, _dt.date]] = None,
        to: Optional[Union[str, _dt.date]] = None,
    ) -> List[str]:
        """Downloads the partitions :meth:`files` lists into ``directory`` at their corpus paths
        (``partitions/<source>/<lane>/<date>/<sha256>.parquet``, what DuckDB, Polars or
        ``asof sql`` read), each checked against its listed sha256 and size: a file whose bytes
        differ raises :class:`asof.IntegrityError` and is not kept. Files already there with
        the right sha256 are not fetched again. Returns the local paths."""
        listing = self.files(source, from_=from_, to=to)
        return _files.download(listing, directory, timeout=self.timeout, user_agent=self.user_agent)

    # -- the live stream ----------------------------------------------------------------------

    def stream(
        self,
        *,
        ticker: Optional[str] = None,
        cik: Optional[Union[str, int]] = None,
        lane: Optional[str] = None,
        last_event_id: Optional[str] = None,
        on_gap: Optional[Callable[[StreamGap], None]] = None,
        reconnects: int = 5,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> Stream:
        """New records as the corpus publishes them (``/v1/stream``), as an iterator of dicts;
        it reconnects with ``Last-Event-ID`` when the connection drops, so nothing is missed or
        repeated. ``last_event_id`` resumes after an event of an earlier stream (its
        ``last_event_id``). See :class:`asof.Stream` for gaps (``on_gap``)."""
        query = encode({"ticker": ticker, "cik": None if cik is None else str(cik), "lane": lane})
        url = self.base_url + "/v1/stream" + ("?" + query if query else "")
        headers = {"User-Agent": self.user_agent}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return Stream(url, headers, last_event_id=last_event_id, on_gap=on_gap,
                      reconnects=reconnects, idle_timeout=idle_timeout)

    # -- decision audit receipts --------------------------------------------------------------

    def audit_log(
        self,
        day: Optional[Union[str, _dt.date]] = None,
        *,
        limit: Optional[int] = None,
        page_size: int = PAGE_MAX,
    ) -> Result:
        """The calling key's audit receipts (Desk plan), oldest first, of one UTC ``day`` or of
        every day: each names a response by its ``request_id`` and the sha256 of its bytes."""
        params = {"day": None if day is None else str(day)}
        return Result(_Unaudited(self), "/v1/audit-log", params, limit, page_size, False)

    def audit_stats(self) -> Dict[str, Any]:
        """The receipt counters of the server process that answers (``/v1/audit-log/stats``)."""
        stats: Dict[str, Any] = _Unaudited(self)._one("/v1/audit-log/stats", {})["results"][0]
        return stats

    def receipt(self, request_id: str, *, day: Optional[Union[str, _dt.date]] = None) -> Optional[Dict[str, Any]]:
        """The audit receipt of one response (by its ``request_id``), or None if the log holds
        none (yet: receipts are written just after the response)."""
        for r in self.audit_log(day):
            if r.get("request_id") == request_id:
                return r
        return None

    @staticmethod
    def verify_receipt(
        receipt: Mapping[str, Any],
        body: Union[bytes, bytearray, memoryview],
        *,
        query: Optional[str] = None,
    ) -> bool:
        """Checks that ``receipt`` describes the response of bytes ``body`` (asked with
        ``query``, if given): ``True``, or :class:`asof.ReceiptMismatch` naming the field that
        differs. ``Result.responses`` holds the bytes of every page of an audited result."""
        return _audit.verify_receipt(receipt, body, query=query)


    def replay(
        self,
        receipt: Mapping[str, Any],
        *,
        query: Optional[str] = None,
        body: Optional[Union[bytes, str]] = None,
    ) -> str:
        """Asks a receipt's request again, pinned to the receipt's ``corpus_version``, and
        proves the same answer (``docs/audit.md``, Replay). ``receipt`` is a row of
        :meth:`audit_log`; ``query`` the query string it digests and ``body`` the response
        kept (or the receipt's own ``query`` and ``body`` members, as ``asof audit replay``
        reads them). Returns ``"bytes"`` (the replayed bytes, the receipt's request id put
        back, hash to ``envelope_sha256``) or ``"members"`` (a file listing, its expiring
        URLs aside); raises :class:`asof.ReceiptMismatch` naming the field that differs."""
        plan = _audit.replay_plan(receipt, query, body)
        answer = self._get(plan.path, plan.query, audit=False)
        return _audit.judge_replay(plan, answer.body or b"")


class _Unaudited(Api):
    """The client's transport, without the audit header: reading the log is never receipted
    (the service says so), and its pages are not kept."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def _send(self, path: str, query: str) -> Answer:
        return self._client._get(path, query, audit=False)

