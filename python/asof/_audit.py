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


class ReplayPlan:
    """A replay file checked against itself: the pinned request to ask and what its answer
    must hash to (``docs/audit.md``, Replay)."""

    def __init__(self, path: str, query: str, receipt: Mapping[str, Any], kept: Optional[Dict[str, Any]]) -> None:
        self.path = path
        self.query = query
        self.corpus_version = str(receipt["corpus_version"])
        self.request_id = str(receipt["request_id"])
        self.envelope_sha256 = str(receipt["envelope_sha256"])
        self.kept = kept
        self.volatile_urls = path.startswith("/v1/files")


def replay_plan(receipt: Mapping[str, Any], query: Optional[str] = None, body: Optional[Union[bytes, str]] = None) -> ReplayPlan:
    """Checks a receipt with its query string (``query``, or the receipt's own ``query``) and,
    when kept, the response body (``body``, or the receipt's ``body``), and builds the request
    pinned to its ``corpus_version``. :class:`asof.ReceiptMismatch` names a field that does
    not hold, before anything is asked."""
    for name in ("route", "params_digest", "corpus_version", "request_id", "envelope_sha256"):
        if not isinstance(receipt.get(name), str):
            raise ReceiptMismatch(name, "a string", "none")
    route = str(receipt["route"])
    if not route.startswith("GET "):
        raise ReceiptMismatch("route", "GET of a data route", route)
    path = route[len("GET "):]
    if query is None:
        query = receipt.get("query")
    if not isinstance(query, str):
        raise ReceiptMismatch("query", "a string", "none")
    query = query.lstrip("?")
    _same(receipt, "params_digest", params_digest(query))
    if body is None:
        body = receipt.get("body")
    kept: Optional[Dict[str, Any]] = None
    if body is not None:
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        _same(receipt, "envelope_sha256", hashlib.sha256(data).hexdigest())
        try:
            kept = json.loads(data)
        except ValueError:
            raise ReceiptMismatch("body", "the JSON envelope sent", "not JSON") from None
        for name in ("corpus_version", "request_id"):
            _same(receipt, name, str((kept or {}).get(name, "")))
    version = str(receipt["corpus_version"])
    pinned = False
    for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if name == "corpus_version":
            if value != version:
                raise ReceiptMismatch("corpus_version", version, f"{value} in the query")
            pinned = True
    if not pinned:
        query = f"{query}&corpus_version={version}" if query else f"corpus_version={version}"
    return ReplayPlan(path, query, receipt, kept)


def judge_replay(plan: ReplayPlan, replayed: bytes) -> str:
    """Judges the bytes a pinned replay answered: ``"bytes"`` when they, with the receipt's
    request id put back, hash to ``envelope_sha256``; ``"members"`` for a file listing whose
    members are the kept body's, expiring URLs aside; else :class:`asof.ReceiptMismatch`
    naming the first member that differs (``results[3].revision_id``)."""
    try:
        got = json.loads(replayed)
    except ValueError:
        raise ReceiptMismatch("body", "a JSON envelope", "a reply that is not JSON") from None
    error = got.get("error") or {}
    if error.get("code") in ("corpus_version_unknown", "corpus_version_not_retained"):
        raise ReceiptMismatch("corpus_version", plan.corpus_version, f"{error.get('code')}: {error.get('message')}")
    if got.get("corpus_version") != plan.corpus_version:
        raise ReceiptMismatch("corpus_version", plan.corpus_version, str(got.get("corpus_version")))
    new_id = str(got.get("request_id", ""))
    restored = replayed.replace(
        f'"request_id":"{new_id}"'.encode(), f'"request_id":"{plan.request_id}"'.encode(), 1
    )
    found = hashlib.sha256(restored).hexdigest()
    if found == plan.envelope_sha256:
        return "bytes"
    if plan.kept is None:
        raise ReceiptMismatch("envelope_sha256", plan.envelope_sha256, found + " (keep the body to learn which member differs)")
    where = _first_difference(plan.kept, got, "", plan.volatile_urls)
    if where is not None:
        raise ReceiptMismatch(where, _at(plan.kept, where), _at(got, where))
    if plan.volatile_urls:
        return "members"
    raise ReceiptMismatch("envelope_sha256", plan.envelope_sha256, "the same members written as other bytes")


def _first_difference(a: Any, b: Any, at: str, volatile: bool) -> Optional[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if (at == "" and k == "request_id") or (volatile and at.startswith("results[") and k in ("url", "expires_at")):
                continue
            path = k if at == "" else f"{at}.{k}"
            if k not in a or k not in b:
                return path
            d = _first_difference(a[k], b[k], path, volatile)
            if d is not None:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (p, q) in enumerate(zip(a, b)):
            d = _first_difference(p, q, f"{at}[{i}]", volatile)
            if d is not None:
                return d
        return f"{at}[{min(len(a), len(b))}]" if len(a) != len(b) else None
    return None if a == b else at


def _at(v: Any, path: str) -> str:
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        try:
            v = v[int(part[1:-1])] if part.startswith("[") else v[part]
        except (KeyError, IndexError, TypeError):
            return "nothing"
    text = json.dumps(v, separators=(",", ":"))
    return text if len(text) <= 120 else text[:120] + "…"


def _same(receipt: Mapping[str, Any], field: str, found: str) -> None:
    expected = str(receipt.get(field, ""))
    if expected != found:
        raise ReceiptMismatch(field, expected, found)
