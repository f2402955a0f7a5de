"""Decision audit receipts checked on the caller's side: a receipt (a row of ``/v1/audit-log``)
names the sha256 of the exact bytes the service sent, the digest of the canonical query string,
the corpus version and the request id; :func:`verify_receipt` recomputes each from the
response the caller kept, so a compliance team can show that the answer they used is the one
the service served, byte for byte (see ``docs/audit.md``)."""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ._errors import ReceiptMismatch


def canonical_query(query: str) -> str:
    """The canonical form of a query string, as the service digests it (``params_digest``):
    pairs form-decoded, sorted by name then value (UTF-8 bytes), every byte outside the RFC 3986
    unreserved set percent-encoded in upper-case hex, joined with ``&``."""
    pairs: List[Tuple[bytes, bytes]] = []
    for part in query.lstrip("?").split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        pairs.append(
            (
                urllib.parse.unquote_plus(name).encode("utf-8", "surrogateescape"),
                urllib.parse.unquote_plus(value).encode("utf-8", "surrogateescape"),
            )
        )
    pairs.sort()
    return "&".join(
        urllib.parse.quote_from_bytes(n, safe="") + "=" + urllib.parse.quote_from_bytes(v, safe="")
        for n, v in pairs
    )


def params_digest(query: str) -> str:
    """The receipt's ``params_digest`` of a query string (sha256 hex of its canonical form)."""
    return hashlib.sha256(canonical_query(query).encode("ascii")).hexdigest()


def verify_receipt(
    receipt: Mapping[str, Any],
    body: Union[bytes, bytearray, memoryview],
    *,
    query: Optional[str] = None,
) -> bool:
    """Checks that ``receipt`` describes the response whose exact bytes are ``body`` (and, when
    ``query`` is given, that it was asked with that query string): the sha256 of the bytes,
    and the corpus version and request id the envelope names. Returns ``True``; raises
    :class:`asof.ReceiptMismatch` naming the first field that differs."""
    data = bytes(body)
    _same(receipt, "envelope_sha256", hashlib.sha256(data).hexdigest())
    if query is not None:
        _same(receipt, "params_digest", params_digest(query))
    try:
        envelope: Dict[str, Any] = json.loads(data)
    except ValueError:
        envelope = {}
    if isinstance(envelope, dict):
        if envelope.get("corpus_version"):
            _same(receipt, "corpus_version", str(envelope["corpus_version"]))
        if envelope.get("request_id"):
            _same(receipt, "request_id", str(envelope["request_id"]))
    return True


def _same(receipt: Mapping[str, Any], field: str, found: str) -> None:
    expected = str(receipt.get(field, ""))
    if expected != found:
        raise ReceiptMismatch(field, expected, found)
