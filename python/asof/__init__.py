"""asof: what was knowable then.

``asof.connect(base_url, key)`` asks a deployment of the service over HTTP; ``asof.open(path)``
answers from a corpus on disk (or in object storage) in-process, with the service's own engine.
Both offer the same queries (``news``, ``diff``, ``record``, ``coverage``, ``mapping``,
``meta``), return the same results, and raise the same exceptions: a coverage hole is
:class:`CoverageMissing`, never an empty answer. A deployment adds flat files
(``files``, ``download``), the live stream (``stream``) and audit receipts (``audit_log``,
``verify_receipt``, ``replay``); a corpus on disk adds ``sql``. Every query takes
``corpus_version=`` to answer from a past version of the corpus. ``asof.spark`` answers the same cuts as
Spark DataFrames on a cluster (``import asof.spark``; pyspark is yours to install)."""

from __future__ import annotations

from typing import Optional

from ._api import Response, Result
from ._audit import canonical_query, params_digest, verify_receipt
from ._errors import (
    AsofError,
    CorpusError,
    CoverageMissing,
    CursorExpired,
    IntegrityError,
    InvalidClock,
    InvalidRequest,
    NotFound,
    PlanRequired,
    RateLimited,
    ReceiptMismatch,
    SqlError,
    StreamGap,
    Unauthorized,
    Unavailable,
    VersionNotRetained,
    VersionUnknown,
)
from ._http import Client
from ._local import Corpus, SqlResult
from ._stream import Stream

__all__ = [
    "AsofError",
    "Client",
    "Corpus",
    "CorpusError",
    "CoverageMissing",
    "CursorExpired",
    "IntegrityError",
    "InvalidClock",
    "InvalidRequest",
    "NotFound",
    "PlanRequired",
    "RateLimited",
    "ReceiptMismatch",
    "Response",
    "Result",
    "SqlError",
    "SqlResult",
    "Stream",
    "StreamGap",
    "Unauthorized",
    "Unavailable",
    "VersionNotRetained",
    "VersionUnknown",
    "canonical_query",
    "connect",
    "open",
    "params_digest",
    "verify_receipt",
]


def connect(
    base_url: str,
    key: Optional[str] = None,
    *,
    timeout: float = 60.0,
    retries: int = 3,
    max_wait: float = 60.0,
    audit: bool = False,
) -> Client:
    """A deployment of the service at ``base_url``, asked with ``key`` (a ``svc_live_…`` API
    key). ``timeout``: seconds per request; ``retries``: how many ``429`` answers are waited out
    (``Retry-After``, at most ``max_wait`` seconds each) before :class:`RateLimited`;
    ``audit``: ask a decision audit receipt for every request and keep every page's bytes
    (``Result.responses``) to check them against."""
    return Client(base_url, key, timeout=timeout, retries=retries, max_wait=max_wait, audit=audit)


def open(location: str, version: Optional[str] = None) -> Corpus:  # noqa: A001 - the API's name
    """A corpus version read in-process: ``location``'s current version, or ``version``."""
    return Corpus(location, version)
