"""schemathesis hooks for the contract run (tests/contract/test_contract.py loads them through
SCHEMATHESIS_HOOKS). Two things a description cannot say, and only these:

1. Cursors (`cursor`, `pageToken`) are opaque tokens only the service mints, each bound to one
   query (contract, paging rule 6): no string a generator makes is one, and the service must
   refuse it (400, `param: cursor`). Generated cases carrying one are dropped; the stateful
   phase still pages with the cursors the service returns, and server/tests/http.rs checks
   forged, foreign and stale cursors.
2. The billing webhook's credential is an HMAC signature of the exact body
   (`Stripe-Signature`): the hook signs each generated body that carries the header with the
   configured server's webhook secret, as the processor would, so the body itself is what is
   tested (a case without the header checks that it is required).
"""

import hashlib
import hmac
import json
import os
import time

import schemathesis

OPAQUE = ("cursor", "pageToken")
WEBHOOK_SECRET = os.environ.get("ASOF_CONTRACT_WEBHOOK_SECRET", "")


@schemathesis.hook
def filter_case(context, case):
    query = case.query or {}
    return not any(name in query for name in OPAQUE)


@schemathesis.hook
def before_call(context, case, kwargs):
    if not WEBHOOK_SECRET or case.operation.path != "/v1/billing/webhook":
        return
    try:
        # The bytes `requests` sends for a JSON body (its json= serialisation).
        payload = json.dumps(case.body, allow_nan=False).encode()
    except (TypeError, ValueError):
        return
    t = int(time.time())
    mac = hmac.new(WEBHOOK_SECRET.encode(), f"{t}.".encode() + payload, hashlib.sha256).hexdigest()
    headers = dict(case.headers or {})
    # A case without the header tests that it is required: it goes unsigned.
    if not any(k.lower() == "stripe-signature" for k in headers):
        return
    headers = {k: v for k, v in headers.items() if k.lower() != "stripe-signature"}
    headers["Stripe-Signature"] = f"t={t},v1={mac}"
    case.headers = headers
