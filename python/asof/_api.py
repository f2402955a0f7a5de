"""One API over two backends: the query methods, the paging result and its conversions to Arrow,
pandas and Polars, written once over the contract's envelopes. A backend only sends
``GET path?query`` and hands back the status and the envelope's bytes (``_send``): over HTTP for
``asof.connect``, in-process through the service's own routes for ``asof.open``."""

from __future__ import annotations

import datetime as _dt
import json
import urllib.parse
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _instants
from ._errors import CursorExpired, error_of
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
    """One envelope: ``status`` and its decoded JSON (``envelope``)."""

    __slots__ = ("status", "envelope", "retry_after")

    def __init__(self, status: int, envelope: Dict[str, Any], retry_after: Optional[float] = None) -> None:
        self.status = status
        self.envelope = envelope
        self.retry_after = retry_after


class Api:
    """The queries both backends answer. Each returns a :class:`Result` (or, for ``record`` and
    ``meta``, one record as a dict) and raises an :class:`asof.AsofError` subclass for an error
    envelope, at the call: a hole is :class:`asof.CoverageMissing`, never an empty result."""

    # -- what a backend provides ------------------------------------------------------------

    def _send(self, path: str, query: str) -> Answer:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- queries ----------------------------------------------------------------------------

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
    ) -> "Result":
        """The rows knowable at ``as_of`` on the ``visible_by`` clock (``published_at`` unless
        said): of a ticker (resolved through the identity valid at ``as_of``), a CIK, or every
        row of ``source``. ``limit`` caps the rows the result walks to (all by default);
        ``page_size`` is the rows asked for per request (at most 1,000)."""
        params = {
            "ticker": ticker,
            "cik": None if cik is None else str(cik),
            "source": source,
            "as_of": _instants.text(as_of),
            "visible_by": visible_by,
            "lane": lane,
        }
        return Result(self, "/v1/news", params, limit, page_size, consistent)

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
    ) -> "Result":
        """The rows that became knowable in ``(as_of_start, as_of_end]`` on one clock."""
        params = {
            "ticker": ticker,
            "cik": None if cik is None else str(cik),
            "source": source,
            "as_of_start": _instants.text(as_of_start),
            "as_of_end": _instants.text(as_of_end),
            "visible_by": visible_by,
            "lane": lane,
        }
        return Result(self, "/v1/news/diff", params, limit, page_size, consistent)

    def record(self, id: str, *, as_of: Instant, visible_by: Optional[str] = None) -> Dict[str, Any]:
        """One record as knowable at ``as_of`` (``NotFound`` when it is not knowable yet)."""
        path = "/v1/news/" + urllib.parse.quote(id, safe="")
        params = {"as_of": _instants.text(as_of), "visible_by": visible_by}
        return self._one(path, params)["results"][0]

    def coverage(
        self,
        source: Optional[str] = None,
        *,
        date: Optional[Union[str, _dt.date]] = None,
        lane: Optional[str] = None,
        as_of: Optional[Instant] = None,
        limit: Optional[int] = None,
        page_size: int = PAGE_MAX,
    ) -> "Result":
        """Coverage certificates, one per source-lane-day (``row_count`` null for a missing day)."""
        params = {
            "source": source,
            "date": None if date is None else str(date),
            "lane": lane,
            "as_of": None if as_of is None else _instants.text(as_of),
        }
        return Result(self, "/v1/coverage", params, limit, page_size, False)

    def mapping(
        self,
        *,
        as_of: Instant,
        ticker: Optional[str] = None,
        cik: Optional[Union[str, int]] = None,
    ) -> List[Dict[str, Any]]:
        """The identity intervals valid at ``as_of`` of a ticker (``CoverageMissing`` when none
        places it) or of a CIK."""
        if (ticker is None) == (cik is None):
            raise TypeError("mapping() takes ticker= or cik=, one of them")
        if ticker is not None:
            path = "/v1/mapping/ticker/" + urllib.parse.quote(ticker, safe="")
        else:
            path = "/v1/mapping/cik/" + urllib.parse.quote(str(cik), safe="")
        return list(self._one(path, {"as_of": _instants.text(as_of)})["results"])

    def meta(self) -> Dict[str, Any]:
        """The deployment's (or the corpus's) meta record: vocabularies, limits, sources held."""
        return self._one("/v1/meta", {})["results"][0]

    # -- plumbing ---------------------------------------------------------------------------

    def _one(self, path: str, params: Params) -> Dict[str, Any]:
        answer = self._send(path, encode(params))
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

    With ``consistent=True`` every page comes from one corpus version: the walk is read whole
    before the first record is yielded, and if the corpus moves during it, it starts again
    once from the first page (a second move raises :class:`asof.CursorExpired`)."""

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
        self._first = self._fetch(None)
        self.corpus_version: str = self._first["corpus_version"]
        self.as_of: Optional[str] = self._first.get("as_of")
        self.visible_by: Optional[str] = self._first.get("visible_by")
        self._records: Optional[List[Dict[str, Any]]] = None
        if consistent:
            self._records = self._walk_pinned()

    def _page_size(self, taken: int) -> str:
        if self._limit is None:
            return str(self._page_max)
        return str(max(1, min(self._page_max, self._limit - taken)))

    def _fetch(self, cursor: Optional[str], taken: int = 0) -> Dict[str, Any]:
        params = dict(self._params)
        params["limit"] = self._page_size(taken)
        params["cursor"] = cursor
        page = self._api._one(self._path, params)
        for key in (page.get("coverage") or {}).get("touched") or []:
            if key not in self.touched:
                self.touched.append(key)
        return page

    def _pages(self, first: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
        page = first
        taken = 0
        while True:
            results = page["results"]
            if self._limit is not None:
                results = results[: self._limit - taken]
            for record in results:
                yield record
            taken += len(results)
            cursor = page.get("next_cursor")
            if cursor is None or (self._limit is not None and taken >= self._limit):
                return
            page = self._fetch(cursor, taken)

    def _walk_pinned(self) -> List[Dict[str, Any]]:
        first = self._first
        for attempt in (1, 2):
            try:
                return list(self._pages(first))
            except CursorExpired:
                if attempt == 2:
                    raise
                first = self._fetch(None)
                self.corpus_version = first["corpus_version"]
        raise AssertionError("unreachable")

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        if self._records is not None:
            return iter(self._records)
        return self._pages(self._first)

    def records(self) -> List[Dict[str, Any]]:
        """Every record, as dicts shaped like the REST record."""
        return list(self)

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table``: news records with the contract's columns (instants as
        ``timestamp[us, UTC]``, nulls kept, ``payload`` as JSON text); other answers as their
        fields."""
        import pyarrow as pa

        rows = self.records()
        if self._path.startswith("/v1/news"):
            return news_table(rows)
        return pa.Table.from_pylist(rows)

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` (instants ``datetime64[us, UTC]``, missing instants ``NaT``)."""
        return self.to_arrow().to_pandas(coerce_temporal_nanoseconds=False)

    def to_polars(self) -> Any:
        """A ``polars.DataFrame`` (instants ``Datetime("us", "UTC")``)."""
        import polars as pl

        return pl.from_arrow(self.to_arrow())

    def __repr__(self) -> str:
        return f"<asof.Result {self._path} {self.corpus_version}>"


def news_table(rows: Sequence[Dict[str, Any]]) -> Any:
    """News records as a ``pyarrow.Table`` with one fixed schema, whatever the rows."""
    import pyarrow as pa

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
                [None if v is None else json.dumps(v, separators=(",", ":")) for v in values],
                type=ty,
            )
        else:
            ty = pa.string()
            array = pa.array(values, type=ty)
        columns[name] = array
        fields.append(pa.field(name, ty))
    return pa.Table.from_arrays(list(columns.values()), schema=pa.schema(fields))
