"""``asof.spark``: the service's cuts as Spark DataFrames, on a cluster, with the as-of rule
intact.

``asof.spark.open(spark, corpus, version=None)`` reads one corpus version's manifest through
Spark's own file system (a local directory, ``file:``, ``s3a://``/``s3://`` or any URL the
cluster's Hadoop connectors read) and answers ``news(...)`` and ``diff(...)`` with exactly the
keyword arguments of ``asof.open(corpus).news(...)``/``.diff(...)``. Each returns a
``pyspark.sql.DataFrame`` of the record columns in the API's order, computed by Spark over the
version's own Parquet files: nothing is copied and no Delta or other jar is needed.

The rule is not restated here. The package's engine (the same code the service runs) decides
each cut before a row is read, as the service does: a coverage hole raises
:class:`asof.CoverageMissing` with the API's ``missing`` keys, a refused argument raises the
API's exception, a ticker is resolved through the identity intervals valid at ``as_of``. For a
cut it answers, it writes the rule's own plan (a filter on the clock, and an anti-join against the
source-lane's supersessions table, small enough for Spark to broadcast, on where each
superseded revision is stored: file name and row index, which Spark computes as it reads) as
Spark SQL over two views of the version's files; this module only registers those views and runs
the SQL. ``docs/spark.md`` walks through a backtest."""

from __future__ import annotations

import builtins
import itertools
import json
import os
import threading
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urlparse

from . import _native
from ._api import Cuts
from ._errors import CorpusError, error_of

__all__ = ["SparkCorpus", "open"]

#: The most files a cut's view is read from as they are: Spark lists more than
#: ``spark.sql.sources.parallelPartitionDiscovery.threshold`` (32) paths with a distributed job,
#: which cost seconds a cut at 1,700 partitions (BENCHMARKS.md, "The as-of rule in Spark").
_LISTED_AT_ONCE = 32

#: Views this process has registered get distinct names (``asof_<n>_news``, ...).
_names = itertools.count(1)
_names_lock = threading.Lock()


def open(spark: Any, corpus: str, version: Optional[str] = None) -> "SparkCorpus":  # noqa: A001
    """One version of the corpus at ``corpus`` (its current one, or ``version``, a
    ``sha256:…`` corpus version the store still holds), answered by ``spark``."""
    return SparkCorpus(spark, corpus, version)


def _root_url(corpus: str) -> str:
    """The corpus root as Spark names it: a URL kept as given (``s3://`` read as ``s3a://``,
    Hadoop's S3 connector), a local path made an absolute ``file:`` URL."""
    parsed = urlparse(corpus)
    if parsed.scheme and len(parsed.scheme) > 1:
        if parsed.scheme == "s3":
            return "s3a://" + corpus[len("s3://"):].rstrip("/")
        return corpus.rstrip("/")
    return "file://" + os.path.abspath(corpus).rstrip("/")


class SparkCorpus(Cuts[Any]):
    """One corpus version, answered by a Spark session: ``news(...)`` and ``diff(...)`` take the
    keyword arguments of ``asof.open(...).news``/``.diff`` (the same methods) and return
    ``pyspark.sql.DataFrame``s. Every DataFrame it returns reads only files that version lists,
    so a result never changes for the same ``corpus_version``."""

    def __init__(self, spark: Any, corpus: str, version: Optional[str] = None) -> None:
        self.spark = spark
        self.location = str(corpus)
        self.root = _root_url(self.location)
        if version is None:
            version = self._read(f"{self.root}/manifests/CURRENT").decode().strip()
            if not version:
                raise CorpusError(f"{self.location}: no corpus published (manifests/CURRENT is empty)")
        if not version.startswith("sha256:") or len(version) != 71:
            raise CorpusError(f"{version!r} is not a corpus version (sha256:<64 hex>)")
        manifest = self._read(f"{self.root}/manifests/{version[len('sha256:'):]}.json")
        try:
            self._planner = _native.RulePlanner(manifest, version)
        except _native.CorpusError as e:
            raise CorpusError(str(e)) from None
        # Each source-lane's DataFrame of all its partitions, made on first use (`_frame`).
        self._lanes: Dict[Tuple[str, str], Any] = {}

    @property
    def corpus_version(self) -> str:
        """The corpus version every DataFrame of this object is a cut of."""
        return str(self._planner.corpus_version)

    def __repr__(self) -> str:
        return f"<asof.spark.SparkCorpus {self.location} {self.corpus_version}>"

    # -- the API's two cuts: ``news`` and ``diff`` of :class:`asof.Api`, answered here -------

    def _cut(
        self, path: str, params: Dict[str, Optional[str]], limit: Optional[int], page_size: int,
        consistent: bool,
    ) -> Any:
        """One cut as a DataFrame. ``limit`` keeps the first rows in the API's order
        (``published_at``, nulls last, then ``id``); without it the DataFrame is unordered, as
        Spark's are (``orderBy`` it if the order matters). ``page_size`` and ``consistent``
        change nothing here: a DataFrame is one version read whole, never paged."""
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise ValueError("limit must be a positive whole number")
        params = dict(params)
        pinned = params.pop("corpus_version", None)
        if pinned is not None and pinned != self.corpus_version:
            # One object is one version's files: another version is another object.
            raise ValueError(
                f"this object reads {self.corpus_version}; for {pinned} open it: "
                "asof.spark.open(spark, corpus, version=...)"
            )
        if params.get("ticker") is not None and not self._planner.has_identity:
            self._load_identity()
        with _names_lock:
            prefix = f"asof_{next(_names)}"
        answer = json.loads(
            self._planner.cut(path == "/v1/news/diff", prefix=prefix, dialect="spark", **params)
        )
        if answer["kind"] == "error":
            raise error_of(int(answer["status"]), answer["envelope"])
        for view in answer["views"]:
            frame = self._frame(answer["source"], answer["lane"], view["holds"], view["paths"])
            frame.createOrReplaceTempView(view["name"])
        df = self.spark.sql(answer["sql"])
        if limit is not None:
            df = df.orderBy(df["published_at"].asc_nulls_last(), df["id"].asc()).limit(limit)
        return df

    # -- the rule's tables, for joins of your own ---------------------------------------

    def supersessions(self, source: str = "sec.edgar", lane: str = "certified_pit") -> Any:
        """The source-lane's supersessions table (``id``, ``revision_id`` superseded,
        ``superseded_by``, ``superseded_at``, and where the version stores the superseded
        revision: ``superseded_file``, a partition's file name as ``_metadata.file_name``
        gives it, and ``superseded_row``, its ``_metadata.row_index`` there)."""
        return self._table(source, lane, "supersessions")

    def coverage(self, source: str = "sec.edgar", lane: str = "certified_pit") -> Any:
        """The source-lane's coverage table: one certificate per day of its certified span."""
        return self._table(source, lane, "coverage")

    # -- inside --------------------------------------------------------------------------

    def _frame(self, source: str, lane: str, holds: str, paths: List[str]) -> Any:
        """A DataFrame of the version's files ``paths``, read with the view's schema (no
        inference, no listing of folders that hold other versions' files).

        A cut names the partitions that may hold one of its rows (by the manifest's clock
        statistics). Few of them are read as they are; many (more than Spark lists without a
        distributed job) are the source-lane's whole DataFrame instead, listed once per
        object and reused by every cut: the SQL's own filter answers the same rows from it,
        and Spark skips row groups by their statistics. A backtest of many cuts then lists the
        source-lane's files once, not once per cut."""
        if not paths:
            empty = self.spark.createDataFrame([], self._planner.schema(holds, "spark"))
            if holds == "rows":
                empty = empty.selectExpr(
                    "*", "CAST(NULL AS STRING) AS asof_file", "CAST(NULL AS BIGINT) AS asof_row")
            return empty
        if holds == "rows" and len(paths) > _LISTED_AT_ONCE:
            key = (source, lane)
            if key not in self._lanes:
                self._lanes[key] = self._read_parquet(holds, self._planner.lane_paths(source, lane))
            return self._lanes[key]
        return self._read_parquet(holds, paths)

    def _read_parquet(self, holds: str, paths: List[str]) -> Any:
        """The files read with the view's schema; a rows view also gets each row's place
        (``asof_file``, ``asof_row``: Spark's ``_metadata.file_name`` and
        ``_metadata.row_index``), which the rule's SQL anti-joins the supersessions table's
        places on instead of reading and hashing every row's ``revision_id``."""
        schema = self._planner.schema(holds, "spark")
        frame = self.spark.read.schema(schema).parquet(*[f"{self.root}/{p}" for p in paths])
        if holds == "rows":
            frame = frame.selectExpr(
                "*", "_metadata.file_name AS asof_file", "_metadata.row_index AS asof_row")
        return frame

    def _table(self, source: str, lane: str, table: str) -> Any:
        path = self._planner.table_path(source, lane, table)
        if path is None:
            raise CorpusError(
                f"{self.corpus_version} lists no {table} table of {source}/{lane} "
                "(a version published before the rule tables existed, or no such source-lane)"
            )
        return self.spark.read.parquet(f"{self.root}/{path}")

    def _load_identity(self) -> None:
        found = self._planner.identity_object()
        if found is None:
            self._planner.load_identity(b"")
            return
        path, _sha = found
        try:
            self._planner.load_identity(self._read(f"{self.root}/{path}"))
        except _native.CorpusError as e:
            raise CorpusError(str(e)) from None

    def _read(self, url: str) -> bytes:
        """One small object (the pointer, a manifest, the identity object): from the local
        file system for ``file:`` URLs, else through Spark's (its Hadoop connectors and their
        credentials)."""
        if url.startswith("file://"):
            path = url[len("file://"):]
            try:
                with builtins.open(path, "rb") as f:
                    return f.read()
            except OSError as e:
                raise CorpusError(f"{url}: {e.strerror or e}") from None
        try:
            rows = self.spark.read.format("binaryFile").load(url).select("content").collect()
        except Exception as e:  # noqa: BLE001 - Spark raises many kinds; the message says which
            raise CorpusError(f"{url}: {e}") from None
        if not rows:
            raise CorpusError(f"{url}: not found")
        return bytes(rows[0][0])

