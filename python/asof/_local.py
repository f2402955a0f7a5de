"""``asof.open``: the API over a corpus on disk or in object storage, answered in-process by the
service's own routes and engine (the native module), with no HTTP and no second
implementation: the same refusals, the same pages, the same holes. It adds ``sql``: the
read-only SQL of ``asof sql`` (the ``news_asof`` table function applies the as-of rule), its
answer handed to pyarrow batch by batch through the Arrow C stream interface."""

from __future__ import annotations

import json
from typing import Any, List, Optional

from . import _native
from ._api import Answer, Api, Page, Params, Response, _module, encode
from ._errors import CorpusError, SqlError, error_of


class Corpus(Api):
    """One version of a corpus: the current one of ``location`` (a directory or an
    ``s3://``/``gs://``/``az://`` URL), or the ``version`` given (a ``sha256:…`` corpus version
    the store still holds: time travel). Every answer names this version."""

    def __init__(self, location: str, version: Optional[str] = None) -> None:
        try:
            self._native = _native.LocalCorpus(str(location), version)
        except _native.CorpusError as e:
            raise CorpusError(str(e)) from None
        self.location = str(location)

    @property
    def corpus_version(self) -> str:
        """The corpus version this object answers from."""
        return self._native.corpus_version

    def __repr__(self) -> str:
        return f"<asof.Corpus {self.location} {self.corpus_version}>"

    def _send(self, path: str, query: str) -> Answer:
        status, body = self._native.get(path, query or None)
        return Answer(status, json.loads(body))

    def _page(self, path: str, params: Params, kept: Optional[List[Response]] = None) -> Page:
        """News and diff pages come as Arrow batches made from the engine's rows (no JSON);
        their dicts are asked for only if the result is iterated."""
        if path not in ("/v1/news", "/v1/news/diff"):
            return super()._page(path, params, kept)
        status, head, batch = self._native.get_batch(path, encode(params) or None)
        envelope = json.loads(head)
        if status != 200:
            raise error_of(status, envelope)
        return Page(envelope, params, None, batch)

    def sql(self, query: str, *, memory_mb: Optional[int] = None) -> "SqlResult":
        """Runs read-only SQL over this version (the tables and table functions of
        ``docs/sql.md``: ``news``, ``news_asof(as_of, clock, lane)``, ``news_diff``,
        ``coverage``, ``identity``...). The query is planned now (a bad one raises
        :class:`asof.SqlError` here); its rows are computed as the result is read. Sorts, joins
        and aggregations hold at most ``memory_mb`` MiB (512 by default) before they spill."""
        return SqlResult(self, query, memory_mb)


class SqlResult:
    """The answer to :meth:`Corpus.sql`: ``to_arrow()`` (a ``pyarrow.Table``), ``to_pandas()``,
    ``to_polars()``, or ``batches()`` (a ``pyarrow.RecordBatchReader``, one batch in memory at
    a time). It implements the Arrow PyCapsule stream protocol (``__arrow_c_stream__``), so
    ``pyarrow.table(r)``, ``polars.DataFrame(r)`` or DuckDB read it directly. The first read
    uses the planned query; every later one runs it again."""

    def __init__(self, corpus: Corpus, query: str, memory_mb: Optional[int]) -> None:
        self.query = query
        self.corpus_version = corpus.corpus_version
        self._corpus = corpus
        self._memory_mb = memory_mb
        self._planned: Any = self._plan()

    def _plan(self) -> Any:
        try:
            return self._corpus._native.sql(self.query, self._memory_mb)
        except _native.SqlError as e:
            raise SqlError(str(e)) from None

    def _take(self) -> Any:
        stream, self._planned = self._planned, None
        return stream if stream is not None else self._plan()

    def batches(self) -> Any:
        """A ``pyarrow.RecordBatchReader`` over the answer."""
        return _module("pyarrow").RecordBatchReader.from_stream(self._take())

    def to_arrow(self) -> Any:
        """The whole answer as a ``pyarrow.Table`` (the engine's buffers, not copied). A failure
        while the rows are computed (a cut the corpus cannot answer, a read error) raises
        :class:`asof.SqlError`."""
        reader = self.batches()
        try:
            return reader.read_all()
        except _module("pyarrow").ArrowException as e:
            raise SqlError(str(e)) from None

    def to_pandas(self) -> Any:
        """The answer as a ``pandas.DataFrame`` (timestamps stay microseconds, UTC)."""
        return self.to_arrow().to_pandas(coerce_temporal_nanoseconds=False)

    def to_polars(self) -> Any:
        """The answer as a ``polars.DataFrame``."""
        return _module("polars").from_arrow(self.to_arrow())

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._take().__arrow_c_stream__(requested_schema)

    def __repr__(self) -> str:
        return f"<asof.SqlResult {self.corpus_version} {self.query!r}>"
