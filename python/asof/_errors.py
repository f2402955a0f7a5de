"""The exceptions of the asof package: each names an answer the service gives, so a failure can
never be mistaken for data (a coverage hole is CoverageMissing, never an empty frame)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional


class AsofError(Exception):
    """An error envelope: the HTTP status, the contract's ``error.code``, its message and, where
    one parameter is at fault, ``param``. ``envelope`` is the whole answer as sent."""

    def __init__(self, status: int, envelope: Dict[str, Any]) -> None:
        error = envelope.get("error") or {}
        self.status: int = status
        self.code: str = str(error.get("code", "unknown"))
        self.message: str = str(error.get("message", ""))
        self.param: Optional[str] = error.get("param")
        self.request_id: Optional[str] = envelope.get("request_id")
        self.corpus_version: Optional[str] = envelope.get("corpus_version")
        self.envelope: Dict[str, Any] = envelope
        where = f" ({self.param})" if self.param else ""
        super().__init__(f"{status} {self.code}{where}: {self.message}")


class CoverageMissing(AsofError):
    """The answer depends on a source-day the corpus does not certify (or a ticker no identity
    interval places): a hole, not an empty answer. ``missing`` lists the coverage keys (at most
    the contract's bound; ``missing_total`` counts them all)."""

    def __init__(self, status: int, envelope: Dict[str, Any]) -> None:
        super().__init__(status, envelope)
        coverage = envelope.get("coverage") or {}
        self.missing: List[str] = list(coverage.get("missing") or [])
        self.missing_total: int = int(coverage.get("missing_total") or len(self.missing))


class CursorExpired(AsofError):
    """The corpus moved since the walk began: start again from the first page, walk with
    ``consistent=True``, or pin the walk with ``corpus_version=``."""


class InvalidRequest(AsofError):
    """A parameter the service refuses; ``param`` names it, ``message`` says why."""


class InvalidClock(InvalidRequest):
    """An instant the contract refuses: a bare date, an offset other than ``Z``, a naive
    ``datetime``, or a malformed string."""


class Unauthorized(AsofError):
    """No key, or a key the service does not accept (unknown, revoked, expired)."""


class PlanRequired(AsofError):
    """The key's plan does not include this route (``403 forbidden``)."""


class NotFound(AsofError):
    """No such record, route or identity evidence."""


class VersionUnknown(NotFound):
    """A ``corpus_version`` this deployment never published (``404 corpus_version_unknown``)."""


class VersionNotRetained(AsofError):
    """A ``corpus_version`` published here but outside the deployment's retention
    (``410 corpus_version_not_retained``; ``retention`` in ``meta()`` says the policy)."""


class RateLimited(AsofError):
    """Too many requests; ``retry_after`` is the wait the service asked for, in seconds."""

    def __init__(self, status: int, envelope: Dict[str, Any], retry_after: Optional[float] = None) -> None:
        super().__init__(status, envelope)
        self.retry_after: Optional[float] = retry_after


class Unavailable(AsofError):
    """The service (or its store) cannot answer now: overloaded, storage or state unavailable."""


class ReceiptMismatch(Exception):
    """An audit receipt that does not describe the response it is checked against: ``field``
    names the receipt's field that differs (``envelope_sha256`` for a body that is not the one
    sent, ``params_digest``, ``corpus_version``, ``request_id``), ``expected`` is the receipt's
    value and ``found`` the response's."""

    def __init__(self, field: str, expected: str, found: str) -> None:
        self.field = field
        self.expected = expected
        self.found = found
        super().__init__(f"the receipt's {field} is {expected}, the response gives {found}")


class IntegrityError(Exception):
    """A downloaded file whose bytes are not the ones listed (``sha256`` or size differ). Nothing
    is kept: the partial download is removed and no file is left at ``path``."""

    def __init__(self, path: str, expected: str, found: str) -> None:
        self.path = path
        self.expected = expected
        self.found = found
        super().__init__(f"{path}: expected sha256 {expected}, the bytes received hash to {found}")


class StreamGap(Exception):
    """The stream could not send some records one by one: a ``bulk`` notice (a version added
    more rows than the stream sends singly) or a ``reset`` (the replay asked for by
    ``Last-Event-ID`` is no longer available). ``event`` is ``"bulk"`` or ``"reset"``, ``data``
    the notice, ``last_event_id`` the id to resume from; read the gap with ``diff(...,
    visible_by="committed_at")``."""

    def __init__(self, event: str, data: Dict[str, Any], last_event_id: Optional[str]) -> None:
        self.event = event
        self.data = data
        self.last_event_id = last_event_id
        super().__init__(f"stream {event}: {data}")


class SqlError(Exception):
    """A SQL query of ``asof.open(...).sql`` that cannot run: not valid SQL, not a read-only
    query, an unknown table or column (the message says which)."""


class CorpusError(Exception):
    """A corpus on disk (or in object storage) that cannot be opened: nothing there, an unknown
    ``version``, a store error."""


_BY_CODE = {
    "coverage_missing": CoverageMissing,
    "cursor_expired": CursorExpired,
    "invalid_request": InvalidRequest,
    "invalid_clock": InvalidClock,
    "query_too_broad": InvalidRequest,
    "unauthorized": Unauthorized,
    "forbidden": PlanRequired,
    "not_found": NotFound,
    "corpus_version_unknown": VersionUnknown,
    "corpus_version_not_retained": VersionNotRetained,
    "rate_limited": RateLimited,
    "overloaded": Unavailable,
    "storage_unavailable": Unavailable,
    "state_unavailable": Unavailable,
    "timeout": Unavailable,
}


def error_of(status: int, envelope: Dict[str, Any], retry_after: Optional[float] = None) -> AsofError:
    """The exception an error envelope stands for."""
    code = str((envelope.get("error") or {}).get("code", ""))
    cls = _BY_CODE.get(code, AsofError)
    if cls is RateLimited:
        return RateLimited(status, envelope, retry_after)
    return cls(status, envelope)
