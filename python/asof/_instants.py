"""Instants as the contract writes them: RFC 3339 UTC with a literal ``Z``."""

from __future__ import annotations

import datetime as _dt
from typing import Union

Instant = Union[str, _dt.datetime]
"""An instant: an aware ``datetime`` (any zone: it names one instant) or an RFC 3339 string
ending in ``Z``. A naive ``datetime`` or a bare ``date`` is refused by the service with its own
message (``InvalidClock``): which zone a naive value meant cannot be known, and guessing it is
how look-ahead creeps in."""


def text(value: Union[Instant, _dt.date]) -> str:
    """The query-string form of an instant. Aware datetimes become UTC with ``Z``; anything else
    is sent as written, for the service to accept or refuse."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            # Sent without an offset, so the service refuses it (never read as UTC or local).
            return value.isoformat()
        utc = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        return utc.isoformat() + "Z"
    if isinstance(value, _dt.date):
        return value.isoformat()
    return str(value)


def parse(value: str) -> _dt.datetime:
    """An instant of an answer (``…Z``) as an aware UTC ``datetime``."""
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    return _dt.datetime.fromisoformat(value)
