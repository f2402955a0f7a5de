"""One API over two backends: the query methods, the paging result and its conversions to Arrow,
pandas and Polars, written once over the contract's envelopes. A backend only sends
``GET path?query`` and hands back the status and the envelope's bytes (``_send``): over HTTP for
``asof.connect``, in-process through the service's own routes for ``asof.open``."""

from __future__ import annotations

import datetime as _dt
import importlib
import json
import urllib.parse
from typing import Any, Dict, Generic, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

from . import _instants
from ._errors import error_of
from ._instants import Instant

#: The most rows one page may hold (the contract's ``limit_max``).
PAGE_MAX = 1000

#: The news record's fields in the contract's order, and which of them are instants.
NEWS_FIELDS: Tuple[str, ...] = (
    "id", "source_id", "lane", "form", "accession", "cik", "title", "event_at",
    "published_at", "available_at", "acceptance_at", "committed_at", "availability_basis",
    "revision_id", "supersedes", "content_sha256", "source_locator", "entity_id", "payload",
    "as_of_visible",
)
INSTANT_FIELDS = frozenset(
    {"event_at", "published_at", "available_at", "acceptance_at", "committed_at"}
)

Params = Dict[str, Optional[str]]


class Answer:
    """One envelope: ``status``, its decoded JSON (``envelope``) and, where the backend keeps
    them, the exact bytes sent (``body``) and the request's id (``request_id``)."""

    __slots__ = ("status", "envelope", "retry_after", "body", "request_id")

    def __init__(
        self,
        status: int,
        envelope: Dict[str, Any],
        retry_after: Optional[float] = None,
        body: Optional[bytes] = None,
        request_id: Optional[str] = None,
    ) -> None:
        self.status = status
        self.envelope = envelope
        self.retry_after = retry_after
        self.body = body
        self.request_id = request_id


class Response:
    """One page exactly as the service sent it: what a receipt of the audit log is checked
    against (:meth:`asof.Client.verify_receipt`). ``query`` is the query string asked, ``body``
    the envelope's bytes, ``request_id`` its ``X-Request-Id``."""

    __slots__ = ("path", "query", "status", "body", "request_id")

    def __init__(self, path: str, query: str, status: int, body: bytes, request_id: Optional[str]) -> None:
        self.path = path
        self.query = query
        self.status = status
        self.body = body
        self.request_id = request_id

    def __repr__(self) -> str:
        return f"<asof.Response {self.status} {self.path}?{self.query} {self.request_id}>"


class Page:
    """One page of a walk: its envelope and its records, as dicts (``envelope["results"]``) or,
    from a corpus opened in-process, as an Arrow batch (``batch``, the envelope's ``results``
    empty) whose dicts are asked for only if the page is iterated."""

    __slots__ = ("envelope", "params", "batch", "_records")

    def __init__(
        self,
        envelope: Dict[str, Any],
        params: Params,
        records: Optional[List[Dict[str, Any]]],
        batch: Any = None,
    ) -> None:
        self.envelope = envelope
        self.params = params
        self.batch = batch
        self._records = records

    def __len__(self) -> int:
        if self._records is not None:
            return len(self._records)
        return int(self.batch.num_rows)

    def records(self, api: "Api", path: str) -> List[Dict[str, Any]]:
        if self._records is None:
            self._records = list(api._one(path, self.params)["results"])
        return self._records


R = TypeVar("R")


class Cuts(Generic[R]):
    """The two cuts, ``news`` and ``diff``, written once for every front end that answers them:
    the backends of :class:`Api` answer a :class:`Result`, ``asof.spark`` a Spark DataFrame.
    Each front end answers ``_cut`` (the route, its parameters as the query string would carry
    them, and how much of the answer to walk)."""

    def _cut(
        self, path: str, params: Params, limit: Optional[int], page_size: int, consistent: bool
    ) -> R:  # pragma: no cover - abstract
        raise NotImplementedError

    def news(
        self,
        *,
        as_of: Instant,
        ticker: Optional[str] = None,
        cik: Optional[Union[str, int]] = None,
        source: Optional[str] = None,
        visible_by: Optional[str] = None,
        lane: Optional[str] = None,
        limit: Optional[int] = None,
        page_size: int = PAGE_MAX,
        consistent: bool = False,
        corpus_version: Optional[str] = None,
    ) -> R:
        """The rows knowable at ``as_of`` on the ``visible_by`` clock (``published_at`` unless
        said): of a ticker (resolved through the identity valid at ``as_of``), a CIK, or every
        row of ``source``. ``limit`` caps the rows the result walks to (all by default);
        ``page_size`` is the rows asked for per request (at most 1,000). ``corpus_version``
        answers from that published version (while the deployment retains it) instead of the
        one served now: the same question asked later gets the same answer."""
        params = {
            "ticker": ticker,
            "cik": None if cik is None else str(cik),
            "source": source,
            "as_of": _instants.text(as_of),
            "visible_by": visible_by,
            "lane": lane,
            "corpus_version": corpus_version,
        }
        return self._cut("/v1/news", params, limit, page_size, consistent)

    def diff(
        self,
        as_of_start: Instant,
        as_of_end: Instant,
        *,
        ticker: Optional[str] = None,
        cik: Optional[Union[str, int]] = None,
        source: Optional[str] = None,
        visible_by: Optional[str] = None,
        lane: Optional[str] = None,
        limit: Optional[int] = None,
        page_size: int = PAGE_MAX,
        consistent: bool = False,
        corpus_version: Optional[str] = None,
    ) -> R:
        """The rows that became knowable in ``(as_of_start, as_of_end]`` on one clock
        (``corpus_version`` as on :meth:`news`)."""
        params = {
            "ticker": ticker,
            "cik": None if cik is None else str(cik),
            "source": source,
            "as_of_start": _instants.text(as_of_start),
            "as_of_end": _instants.text(as_of_end),
            "visible_by": visible_by,
            "lane": lane,
            "corpus_version": corpus_version,
        }
        return self._cut("/v1/news/diff", params, limit, page_size, consistent)



class Api(Cuts["Result"]):
    """The queries both backends answer. Each returns a :class:`Result` (or, for ``record`` and
    ``meta``, one record as a dict) and raises an :class:`asof.AsofError` subclass for an error
    envelope, at the call: a hole is :class:`asof.CoverageMissing`, never an empty result."""

    # -- what a backend provides ------------------------------------------------------------

    def _send(self, path: str, query: str) -> Answer:  # pragma: no cover - abstract
        raise NotImplementedError

    def _page(self, path: str, params: Params, kept: Optional[List["Response"]] = None) -> Page:
        """One page of a walk (a backend with a faster form of pages overrides it)."""
        envelope = self._one(path, params, kept)
        return Page(envelope, params, list(envelope.get("results") or []))

    #: Whether results keep every page's bytes (``Result.responses``): a client asking for
    #: audit receipts does, to check them against.
    _keep_responses = False

    # -- queries ----------------------------------------------------------------------------

    def _cut(
        self, path: str, params: Params, limit: Optional[int], page_size: int, consistent: bool
    ) -> "Result":
        return Result(self, path, params, limit, page_size, consistent)

    def record(
        self,
        id: str,
        *,
        as_of: Instant,
        visible_by: Optional[str] = None,
        corpus_version: Optional[str] = None,
    ) -> Dict[str, Any]:
        """One record as knowable at ``as_of`` (``NotFound`` when it is not knowable yet)."""
        path = "/v1/news/" + urllib.parse.quote(id, safe="")
        params = {
            "as_of": _instants.text(as_of),
            "visible_by": visible_by,
            "corpus_version": corpus_version,
        }
        record: Dict[str, Any] = self._one(path, params)["results"][0]
        return record

    def coverage(
        self,
        source: Optional[str] = None,
        *,
        date: Optional[Union[str, _dt.date]] = None,
        lane: Optional[str] = None,
        as_of: Optional[Instant] = None,
        limit: Optional[int] = None,
        page_size: int = PAGE_MAX,
        corpus_version: Optional[str] = None,
    ) -> "Result":
        """Coverage certificates, one per source-lane-day (``row_count`` null for a missing day)."""
        params = {
            "source": source,
            "date": None if date is None else str(date),
            "lane": lane,
            "as_of": None if as_of is None else _instants.text(as_of),
            "corpus_version": corpus_version,
        }
        return Result(self, "/v1/coverage", params, limit, page_size, False)

    def mapping(
        self,
        *,
        as_of: Instant,
        ticker: Optional[str] = None,
        cik: Optional[Union[str, int]] = None,
        corpus_version: Optional[str] = None,
    ) -> List[Dict[str, Any]]:
        """The identity intervals valid at ``as_of`` of a ticker (``CoverageMissing`` when none
        places it) or of a CIK."""
        if (ticker is None) == (cik is None):
            raise TypeError("mapping() takes ticker= or cik=, one of them")
        if ticker is not None:
            path = "/v1/mapping/ticker/" + urllib.parse.quote(ticker, safe="")
        else:
            path = "/v1/mapping/cik/" + urllib.parse.quote(str(cik), safe="")
        params = {"as_of": _instants.text(as_of), "corpus_version": corpus_version}
        return list(self._one(path, params)["results"])

    def meta(self, *, corpus_version: Optional[str] = None) -> Dict[str, Any]:
        """The deployment's (or the corpus's) meta record: vocabularies, limits, sources held
        (as ``corpus_version`` held them, when given)."""
        meta: Dict[str, Any] = self._one("/v1/meta", {"corpus_version": corpus_version})["results"][0]
        return meta

    # -- plumbing ---------------------------------------------------------------------------

    def _one(self, path: str, params: Params, kept: Optional[List[Response]] = None) -> Dict[str, Any]:
        query = encode(params)
        answer = self._send(path, query)
        if kept is not None and answer.body is not None:
            kept.append(Response(path, query, answer.status, answer.body, answer.request_id))
        if answer.status != 200:
            raise error_of(answer.status, answer.envelope, answer.retry_after)
        return answer.envelope


def encode(params: Params) -> str:
    """A query string of the parameters that are set, in the order given."""
    return urllib.parse.urlencode([(k, v) for k, v in params.items() if v is not None])


class Result:
    """The answer to a query, walked page by page as it is read.

    The first page is asked for when the query is made (so a hole raises there); iterating
    yields every record, asking for the next page only when the previous one is used up, until
    the answer ends or ``limit`` records were yielded. ``corpus_version`` names the version that
    answered; ``touched`` the coverage keys the pages read so far depended on.

    With ``consistent=True`` every page comes from one corpus version: the pages after the
    first are asked pinned to the first page's ``corpus_version``, so a corpus that moves
    during the walk changes nothing (the walk is read whole before the first record is
    yielded). A deployment that no longer retains that version refuses it
    (:class:`asof.VersionNotRetained`)."""

    def __init__(
        self,
        api: Api,
        path: str,
        params: Params,
        limit: Optional[int],
        page_size: int,
        consistent: bool,
    ) -> None:
        if limit is not None and limit < 0:
            raise ValueError("limit must be 0 or more")
        if not 1 <= page_size <= PAGE_MAX:
            raise ValueError(f"page_size must be 1 to {PAGE_MAX}")
        self._page_max = page_size
        self._api = api
        self._path = path
        self._params = params
        self._limit = limit
        self._consistent = consistent
        self.touched: List[str] = []
        #: Every page as sent (bytes and request id), kept when the client asks for audit
        #: receipts (``asof.connect(..., audit=True)``); empty otherwise.
        self.responses: List[Response] = []
        self._kept: Optional[List[Response]] = self.responses if api._keep_responses else None
        self._first = self._fetch(None)
        self.corpus_version: str = self._first.envelope["corpus_version"]
        self.as_of: Optional[str] = self._first.envelope.get("as_of")
        self.visible_by: Optional[str] = self._first.envelope.get("visible_by")
        self._pinned: Optional[List[Tuple[Page, int]]] = None
        if consistent:
            if self._params.get("corpus_version") is None:
                self._params = {**self._params, "corpus_version": self.corpus_version}
            self._pinned = list(self._walk(self._first))

    def _page_size(self, taken: int) -> str:
        if self._limit is None:
            return str(self._page_max)
        return str(max(1, min(self._page_max, self._limit - taken)))

    def _fetch(self, cursor: Optional[str], taken: int = 0) -> Page:
        params = dict(self._params)
        params["limit"] = self._page_size(taken)
        params["cursor"] = cursor
        page = self._api._page(self._path, params, self._kept)
        for key in (page.envelope.get("coverage") or {}).get("touched") or []:
            if key not in self.touched:
                self.touched.append(key)
        return page

    def _walk(self, first: Page) -> Iterator[Tuple[Page, int]]:
        """The walk's pages from ``first``, each with how many of its rows are the result's
        (all, but at the end of a ``limit``)."""
        page = first
        taken = 0
        while True:
            n = len(page)
            if self._limit is not None:
                n = min(n, self._limit - taken)
            yield page, n
            taken += n
            cursor = page.envelope.get("next_cursor")
            if cursor is None or (self._limit is not None and taken >= self._limit):
                return
            page = self._fetch(cursor, taken)

    def _pages(self) -> Iterator[Tuple[Page, int]]:
        if self._pinned is not None:
            return iter(self._pinned)
        return self._walk(self._first)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        for page, n in self._pages():
            yield from page.records(self._api, self._path)[:n]

    def records(self) -> List[Dict[str, Any]]:
        """Every record, as dicts shaped like the REST record."""
        return list(self)

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table``: news records with the contract's columns (instants as
        ``timestamp[us, UTC]``, nulls kept, ``payload`` as JSON text); other answers as their
        fields."""
        if self._path in ("/v1/news", "/v1/news/diff"):
            pages = list(self._pages())
            if all(page.batch is not None for page, _ in pages):
                return news_table_of_batches([(page.batch, n) for page, n in pages])
            return news_table([r for page, n in pages for r in page.records(self._api, self._path)[:n]])
        return _module("pyarrow").Table.from_pylist(self.records())

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` (instants ``datetime64[us, UTC]``, missing instants ``NaT``)."""
        return self.to_arrow().to_pandas(coerce_temporal_nanoseconds=False)

    def to_polars(self) -> Any:
        """A ``polars.DataFrame`` (instants ``Datetime("us", "UTC")``)."""
        return _module("polars").from_arrow(self.to_arrow())

    def __repr__(self) -> str:
        return f"<asof.Result {self._path} {self.corpus_version}>"


def news_schema() -> Any:
    """The ``pyarrow`` schema of news records as ``to_arrow()`` gives them."""
    pa = _module("pyarrow")
    return pa.schema(
        [
            pa.field(
                name,
                pa.timestamp("us", tz="UTC")
                if name in INSTANT_FIELDS
                else pa.bool_()
                if name == "as_of_visible"
                else pa.string(),
            )
            for name in NEWS_FIELDS
        ]
    )


def news_table_of_batches(batches: Sequence[Tuple[Any, int]]) -> Any:
    """Pages the engine answered as Arrow batches (the stored record's columns; each with the
    rows of it the result holds) as one table of :func:`news_schema`: the batches' buffers are
    imported through the Arrow PyCapsule interface and kept, not copied; ``as_of_visible``
    (true on every row of a cut) is added."""
    pa = _module("pyarrow")
    table = pa.Table.from_batches([pa.record_batch(b).slice(0, n) for b, n in batches])
    table = table.append_column("as_of_visible", pa.repeat(pa.scalar(True), table.num_rows))
    return table.cast(news_schema())


def news_table(rows: Sequence[Dict[str, Any]]) -> Any:
    """News records as a ``pyarrow.Table`` with one fixed schema, whatever the rows."""
    pa = _module("pyarrow")

    columns = {}
    fields = []
    for name in NEWS_FIELDS:
        values = [r.get(name) for r in rows]
        if name in INSTANT_FIELDS:
            ty = pa.timestamp("us", tz="UTC")
            array = pa.array(
                [None if v is None else _instants.parse(v) for v in values], type=ty
            )
        elif name == "as_of_visible":
            ty = pa.bool_()
            array = pa.array(values, type=ty)
        elif name == "payload":
            ty = pa.string()
            array = pa.array(
                [None if v is None else json.dumps(v, separators=(",", ":"), ensure_ascii=False) for v in values],
                type=ty,
            )
        else:
            ty = pa.string()
            array = pa.array(values, type=ty)
        columns[name] = array
        fields.append(pa.field(name, ty))
    return pa.Table.from_arrays(list(columns.values()), schema=pa.schema(fields))


def _module(name: str) -> Any:
    """An optional dependency (pyarrow, polars), imported when a conversion first needs it, with
    a message naming the extra that installs it."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        extra = "polars" if name == "polars" else "arrow"
        raise ImportError(f"{name} is needed for this conversion: pip install 'asof[{extra}]'") from e
