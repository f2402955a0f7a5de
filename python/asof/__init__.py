"""asof: what was knowable then.

``asof.connect(base_url, key)`` asks a deployment of the service over HTTP; ``asof.open(path)``
answers from a corpus on disk (or in object storage) in-process, with the service's own engine.
Both offer the same queries (``news``, ``diff``, ``record``, ``coverage``, ``mapping``,
``meta``), return the same results, and raise the same exceptions: a coverage hole is
:class:`CoverageMissing`, never an empty answer."""

from __future__ import annotations

from typing import Optional

from ._api import Result
from ._errors import (
    AsofError,
    CorpusError,
    CoverageMissing,
    CursorExpired,
    InvalidClock,
    InvalidRequest,
    NotFound,
    PlanRequired,
    RateLimited,
    Unauthorized,
    Unavailable,
)
from ._http import Client
from ._local import Corpus

__all__ = [
    "AsofError",
    "Client",
    "Corpus",
    "CorpusError",
    "CoverageMissing",
    "CursorExpired",
    "InvalidClock",
    "InvalidRequest",
    "NotFound",
    "PlanRequired",
    "RateLimited",
    "Result",
    "Unauthorized",
    "Unavailable",
    "connect",
    "open",
]


def connect(
    base_url: str,
    key: Optional[str] = None,
    *,
    timeout: float = 60.0,
    retries: int = 3,
    max_wait: float = 60.0,
) -> Client:
    """A deployment of the service at ``base_url``, asked with ``key`` (a ``svc_live_…`` API
    key). ``timeout``: seconds per request; ``retries``: how many ``429`` answers are waited out
    (``Retry-After``, at most ``max_wait`` seconds each) before :class:`RateLimited`."""
    return Client(base_url, key, timeout=timeout, retries=retries, max_wait=max_wait)


def open(location: str, version: Optional[str] = None) -> Corpus:  # noqa: A001 - the API's name
    """A corpus version read in-process: ``location``'s current version, or ``version``."""
    return Corpus(location, version)
