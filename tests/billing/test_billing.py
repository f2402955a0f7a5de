#!/usr/bin/env python3
"""Billing end to end: the real `asof serve` with billing configured against the Stripe-shaped
fake processor (`asof-fake-processor`, built from test-support: no real payment processor runs
on loopback), a browser session made by the e-mail link through a real SMTP server (aiosmtpd),
and webhook signatures made the way Stripe makes them and checked with the official `stripe`
package: `stripe.Webhook.construct_event` must accept every delivery this test sends as genuine,
and refuse the stale and tampered ones the server refuses.

Run once with a SQLite state store and once with PostgreSQL (a database of its own), each check
by name:

1. checkout: 400 without `attestation`, 403 `commercial_license_required` with `false`, 200 and
   the processor's hosted page with `true`; the processor saw the customer and the price;
2. the processor's events after payment, signed and accepted by the `stripe` package, move the
   plan to power, and the key made before paying reaches /v1/files;
3. a replayed event answers 200 `replayed`; a tampered body and a stale timestamp are refused
   by the `stripe` package and by the server (400 `invalid_signature`), changing nothing;
4. the portal opens at the processor; a cancellation brings the plan back to researcher and
   the key loses /v1/files;
5. neither the processor's secret key nor the webhook signing secret appears in the log.

Prints 'billing clients: N passed, N failed'.
"""

import argparse
import hashlib
import hmac
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

import httpx
import stripe
from aiosmtpd.controller import Controller

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "tests", "accounts"))
from support import FakeProcessor, Server, email_sign_in, free_port  # noqa: E402
from test_signin import PG, Browserless, Inbox, postgres_database  # noqa: E402

# The fake's credentials and prices (test-support/src/processor.rs).
SECRET_KEY = "sk_test_asof_fake_4eC39HqLyjWDarjtT1zdp7dc"
WEBHOOK_SECRET = "whsec_asof_fake_5f1d2c3b4a69788796a5b4c3d2e1f0"
PRICES = ["price_1ResearcherMonthly", "price_1PowerMonthly", "price_1DeskMonthly"]
SignatureError = getattr(stripe, "SignatureVerificationError", None) or stripe.error.SignatureVerificationError


def stripe_signature(payload: bytes, t: int, secret: str = WEBHOOK_SECRET) -> str:
    """The Stripe-Signature header as Stripe documents it: HMAC-SHA256 of "<t>.<payload>"
    under the endpoint secret. Computed here, independently of the stripe package, which then
    judges it."""
    mac = hmac.new(secret.encode(), f"{t}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


class Run:
    def __init__(self, binary, fake_binary, workdir, db):
        self.fake = FakeProcessor(fake_binary)
        self.inbox = Inbox()
        self.smtp = Controller(self.inbox, hostname="127.0.0.1", port=free_port())
        self.smtp.start()
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.server = Server(
            binary, workdir, port=port, db=db,
            extra=[
                "--smtp-url", f"smtp://127.0.0.1:{self.smtp.port}",
                "--mail-from", "asof <no-reply@asof.test>",
                "--public-url", self.base,
                "--insecure-cookies",
                "--billing-api-url", self.fake.url,
                "--billing-price-researcher", PRICES[0],
                "--billing-price-power", PRICES[1],
                "--billing-price-desk", PRICES[2],
                "--license-contact", "mailto:licensing@asof.test",
            ],
            # Secrets from the environment, as the README advises.
            env={
                "ASOF_BILLING_SECRET_KEY": SECRET_KEY,
                "ASOF_BILLING_WEBHOOK_SECRET": WEBHOOK_SECRET,
                "ASOF_LOG": "trace",
            },
        )
        self.http = Browserless(self.base)
        self.address = f"payer-{uuid.uuid4().hex[:8]}@example.com"
        self.cookie = None
        self.key = None
        self.subscription = None

    def stop(self):
        self.server.stop()
        self.smtp.stop()
        self.fake.stop()

    def session(self):
        """The signed-in browser's cookie and a key it made (signed in once per run)."""
        if self.cookie is None:
            _, _, cookie = email_sign_in(self.base, self.address, self.inbox)
            self.cookie = cookie.split(";")[0]
            r = self.write("POST", "/v1/keys", {"name": "backtest"})
            assert r.status_code == 200, r.text
            self.key = r.json()["results"][0]["secret"]
        return self.cookie

    def write(self, method, path, body=None):
        headers = {"cookie": self.cookie, "origin": self.base}
        return self.http.request(method, path, headers=headers, json=body)

    def keyed(self, path):
        return self.http.get(path, headers={"authorization": f"Bearer {self.key}"})

    def deliver(self, event, t=None, signature=None, body=None):
        """Posts an event as the processor does; returns the server's answer."""
        payload = body if body is not None else json.dumps(event, separators=(",", ":")).encode()
        sig = signature or stripe_signature(payload, t or int(time.time()))
        return httpx.post(self.base + "/v1/billing/webhook", content=payload,
                          headers={"content-type": "application/json; charset=utf-8", "stripe-signature": sig},
                          timeout=10), payload, sig

    def deliver_genuine(self, event):
        r, payload, sig = self.deliver(event)
        # What Stripe's own library accepts, the server accepts: same scheme.
        parsed = stripe.Webhook.construct_event(payload, sig, WEBHOOK_SECRET)
        assert parsed["id"] == event["id"] and parsed["type"] == event["type"]
        assert r.status_code == 200, r.text
        return r.json()["results"][0]

    def wait_for_files(self, status, timeout=7):
        deadline = time.monotonic() + timeout
        while True:
            r = self.keyed("/v1/files")
            if r.status_code == status:
                return r
            assert time.monotonic() < deadline, (status, r.status_code, r.text)
            time.sleep(0.2)

    # ---- checks ----------------------------------------------------------------------------

    def checkout_needs_the_internal_use_attestation(self):
        self.session()
        r = self.write("POST", "/v1/billing/checkout", {"plan_id": "power"})
        assert r.status_code == 400 and r.json()["error"]["param"] == "attestation", r.text
        r = self.write("POST", "/v1/billing/checkout", {"plan_id": "power", "attestation": False})
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "commercial_license_required"
        assert "mailto:licensing@asof.test" in r.json()["error"]["message"]
        r = self.write("POST", "/v1/billing/checkout", {"plan_id": "power", "attestation": True})
        assert r.status_code == 200, r.text
        answer = r.json()["results"][0]
        assert answer["url"].startswith(self.fake.url + "/pay/cs_test_"), answer
        self.checkout_session = answer["checkout_session_id"]
        seen = self.fake.requests()
        assert [q["path"] for q in seen] == ["/v1/customers", "/v1/checkout/sessions"], seen
        form = dict(seen[1]["form"])
        assert form["line_items[0][price]"] == PRICES[1] and form["metadata[plan]"] == "power", form
        assert form["success_url"] == f"{self.base}/account?checkout=success"
        assert httpx.get(form["success_url"], timeout=10).status_code == 200, "the return page exists"

    def paid_events_signed_as_stripe_signs_move_the_plan_to_power(self):
        assert self.keyed("/v1/files").status_code == 403, "researcher has no files"
        done = self.fake.post(f"/_fake/checkout/sessions/{self.checkout_session}/complete")
        self.subscription = done["subscription"]
        self.paid = done["events"]
        outcomes = [self.deliver_genuine(e) for e in self.paid]
        assert [o["outcome"] for o in outcomes] == ["applied", "applied"], outcomes
        assert outcomes[-1]["plan"] == "power"
        me = self.keyed("/v1/me").json()["results"][0]
        assert me["plan"] == "power" and me["requests_per_minute"] == 300, me
        self.wait_for_files(200)

    def replayed_tampered_and_stale_deliveries_change_nothing(self):
        for e in self.paid:
            assert self.deliver_genuine(e)["outcome"] == "replayed"
        cancel = self.fake.post(f"/_fake/subscriptions/{self.subscription}/cancel")["events"][0]
        payload = json.dumps(cancel, separators=(",", ":")).encode()
        now = int(time.time())
        tampered = payload.replace(b'"canceled"', b'"active"')
        assert tampered != payload
        for body, sig in [
            (tampered, stripe_signature(payload, now)),
            (payload, stripe_signature(payload, now - 301)),
            (payload, stripe_signature(payload, now, "whsec_someone_else")),
        ]:
            try:
                stripe.Webhook.construct_event(body, sig, WEBHOOK_SECRET)
                raise AssertionError("the stripe package accepted a delivery it must refuse")
            except SignatureError:
                pass
            r, _, _ = self.deliver(None, body=body, signature=sig)
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_signature", r.text
        assert self.keyed("/v1/me").json()["results"][0]["plan"] == "power"
        self.cancel = cancel

    def the_portal_opens_and_a_cancellation_returns_to_researcher(self):
        r = self.write("POST", "/v1/billing/portal")
        assert r.status_code == 200, r.text
        assert r.json()["results"][0]["url"].startswith(self.fake.url), r.text
        assert self.deliver_genuine(self.cancel)["plan"] == "researcher"
        assert self.keyed("/v1/me").json()["results"][0]["plan"] == "researcher"
        self.wait_for_files(403)

    def no_secret_in_the_log(self):
        self.server.stop()
        log = open(self.server.log_path).read()
        for secret in [SECRET_KEY, WEBHOOK_SECRET, self.key]:
            assert secret not in log, "a secret reached the log"
        assert "plan changed" in log, "the log does record plan changes"


def run_all(binary, fake_binary, workdir, db):
    run = Run(binary, fake_binary, workdir, db)
    results = []
    try:
        for name in [
            "checkout_needs_the_internal_use_attestation",
            "paid_events_signed_as_stripe_signs_move_the_plan_to_power",
            "replayed_tampered_and_stale_deliveries_change_nothing",
            "the_portal_opens_and_a_cancellation_returns_to_researcher",
            "no_secret_in_the_log",
        ]:
            label = f"{'sqlite' if db.startswith('sqlite') else 'postgres'}::{name}"
            try:
                getattr(run, name)()
                print(f"test {label} ... ok")
                results.append(True)
            except Exception as e:  # noqa: BLE001 - report every check by name
                print(f"test {label} ... FAILED: {e!r}")
                results.append(False)
    finally:
        run.stop()
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--fake-processor", required=True, help="the asof-fake-processor binary")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="asof-billing-") as d:
        results += run_all(args.bin, args.fake_processor, d, f"sqlite://{d}/state.db")
    name, url = postgres_database()
    if url is None:
        if os.environ.get("ASOF_REQUIRE_POSTGRES"):
            print("test postgres::* ... FAILED: PostgreSQL required but unreachable")
            results.append(False)
        else:
            print("SKIPPED: postgres billing checks (no PostgreSQL)")
    else:
        try:
            with tempfile.TemporaryDirectory(prefix="asof-billing-pg-") as d:
                results += run_all(args.bin, args.fake_processor, d, url)
        finally:
            subprocess.run(["psql", PG, "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], capture_output=True)
    passed = sum(results)
    print(f"billing clients: {passed} passed, {len(results) - passed} failed")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
