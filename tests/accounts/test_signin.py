#!/usr/bin/env python3
"""Sign-in by e-mail link end to end: the real `asof serve`, a real SMTP server on loopback
(aiosmtpd, from PyPI), and an HTTP client that follows what a browser would.

Run once with a SQLite state store and once with PostgreSQL (a database of its own, created
and dropped here), each check by name:

1. a link sent to an address signs it in once, in the browser that asked for it: opening it
   leads to a confirmation page, whose button sets an HttpOnly, SameSite=Lax `svc_session`
   cookie and redirects to /account; the same link again redirects to
   /sign-in?error=link_used and sets nothing; opened in another browser (or by a mail scanner)
   it signs nobody in and stays live;
2. the answer to "send me a link" is the same whether or not the account exists;
3. a sixth link to one address within 15 minutes is 429 with Retry-After;
4. with the session: create a key (secret shown once), call /v1/news with it, revoke it, the
   call is refused; a Bearer key cannot create keys; logout ends the session;
5. providers A and B (npm's oauth2-mock-server, a real OpenID Connect provider on loopback,
   with two registered clients): a first provider sign-in makes an account for its identity;
   one whose address has an account made by e-mail signs nothing in until a link mailed to
   that address is confirmed in the same browser, then joins that account; a flow started for
   A is refused by B's callback; a forged `state`, a
   callback without the flow this browser started, an ID token signed by another key, one
   with a wrong nonce, a denied consent and an unverified e-mail each land on
   /sign-in?error=... without a session;
6. no secret (link token, session id, API key, OAuth code or token) appears in the server's
   log at trace level, nor in clear in the state store (the SQLite files, or every table of
   the PostgreSQL database).

Prints 'signin clients: N passed, N failed'.
"""

import argparse
import email
import email.policy
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid

import httpx
from aiosmtpd.controller import Controller

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))
from support import Server, confirm_link, email_sign_in, free_port, session_cookie, set_cookie  # noqa: E402

PG = os.environ.get("ASOF_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")


class Inbox:
    """An aiosmtpd handler keeping every message it accepts."""

    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        # The body as a mail reader shows it: MIME-decoded (long lines travel
        # quoted-printable).
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append((envelope.rcpt_tos, msg.get_content()))
        return "250 OK"

    def link_for(self, address, timeout=10):
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for rcpts, body in self.messages[seen:]:
                if address in rcpts:
                    m = re.search(r"(http://\S+/v1/auth/email/callback\?token=[0-9a-f]{64})", body)
                    if m:
                        self.messages.remove((rcpts, body))
                        return m.group(1)
            time.sleep(0.05)
        raise AssertionError(f"no sign-in mail for {address} within {timeout} s")


class Browserless:
    """HTTP without a cookie jar: every cookie a check sends, it sends by hand."""

    def __init__(self, base):
        self.base = base

    def request(self, method, path, **kw):
        url = path if path.startswith("http") else self.base + path
        return httpx.request(method, url, follow_redirects=False, timeout=10, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def close(self):
        pass


class Provider:
    """oauth2-mock-server under node, its behaviour set by a mode file."""

    def __init__(self, node, module, workdir, email):
        self.port = free_port()
        self.mode_file = os.path.join(workdir, "provider-mode")
        self.set("ok")
        self.proc = subprocess.Popen(
            [node, os.path.join(REPO, "tests/accounts/oidc_provider.mjs"), str(self.port), self.mode_file, email],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "OAUTH2_MOCK_SERVER": module},
        )
        line = self.proc.stdout.readline()
        if not line.startswith("listening "):
            raise RuntimeError(f"the OpenID Connect provider did not start: {line}{self.proc.stdout.read()}")
        self.issuer = line.split(" ", 1)[1].strip()

    def set(self, mode):
        with open(self.mode_file, "w") as f:
            f.write(mode)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


class Run:
    def __init__(self, binary, workdir, db, node, module):
        self.shared_email = f"both-{uuid.uuid4().hex[:8]}@example.com"
        self.provider = Provider(node, module, workdir, self.shared_email)
        self.inbox = Inbox()
        self.smtp = Controller(self.inbox, hostname="127.0.0.1", port=free_port())
        self.smtp.start()
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.server = Server(
            binary,
            workdir,
            port=port,
            db=db,
            extra=[
                "--smtp-url", f"smtp://127.0.0.1:{self.smtp.port}",
                "--mail-from", "asof <no-reply@asof.test>",
                "--public-url", self.base,
                "--insecure-cookies",
                "--provider-a-issuer", self.provider.issuer,
                "--provider-a-client-id", "asof-test",
                # Provider B: the same real provider, registered as another client.
                "--provider-b-issuer", self.provider.issuer,
                "--provider-b-client-id", "asof-test-b",
            ],
            # The client secret by environment, as the flag's help advises.
            env={"ASOF_LOG": "trace", "ASOF_PROVIDER_A_CLIENT_SECRET": "s3cret-of-the-client"},
        )
        self.binary = binary
        self.db = db
        self.secrets = []
        self.http = Browserless(self.base)

    def stop(self):
        self.http.close()
        self.server.stop()
        self.smtp.stop()
        self.provider.stop()

    def sign_in(self, address):
        link, binding, cookie = email_sign_in(self.base, address, self.inbox)
        self.secrets.append(link.rsplit("=", 1)[1])
        self.secrets.append(binding.split("=", 1)[1])
        self.secrets.append(cookie.split(";")[0].split("=", 1)[1])
        self.binding = binding
        return link, cookie

    # ---- checks ----------------------------------------------------------------------------

    def a_link_signs_in_once(self):
        address = f"once-{uuid.uuid4().hex[:8]}@example.com"
        link, cookie = self.sign_in(address)
        attrs = [a.strip() for a in cookie.split(";")]
        assert "HttpOnly" in attrs and "SameSite=Lax" in attrs and "Path=/" in attrs, attrs
        assert "Secure" not in attrs, "--insecure-cookies drops Secure"
        value = attrs[0]
        me = self.http.get("/v1/me", headers={"cookie": value})
        assert me.status_code == 200 and me.json()["results"][0]["email"] == address, me.text
        assert me.json()["results"][0]["plan"] == "researcher"
        again = confirm_link(self.base, link, self.binding)
        assert again.status_code == 302, again.status_code
        assert again.headers["location"] == "/sign-in?error=link_used", again.headers
        assert session_cookie(again) is None

    def a_link_opened_elsewhere_or_prefetched_signs_nobody_in(self):
        # Login CSRF: the attacker asks for a link to their own address and gets a victim to
        # open it. Mail scanners fetch every link in a message. Neither may sign anyone in or
        # spend the link.
        address = f"bound-{uuid.uuid4().hex[:8]}@example.com"
        r = self.http.post("/v1/auth/email/start", json={"email": address})
        assert r.status_code == 200, r.text
        bind = set_cookie(r, "svc_signin")
        attrs = [a.strip() for a in bind.split(";")]
        assert "HttpOnly" in attrs and "SameSite=Lax" in attrs and "Path=/" in attrs, attrs
        binding = attrs[0]
        self.secrets.append(binding.split("=", 1)[1])
        link = self.inbox.link_for(address)
        self.secrets.append(link.rsplit("=", 1)[1])
        token = link.rsplit("=", 1)[1]
        for _ in range(2):  # a scanner's prefetch, twice: nothing spent, no session
            opened = self.http.get(link, headers={"cookie": binding})
            assert opened.status_code == 302, opened.status_code
            assert opened.headers["location"] == f"/sign-in/confirm?token={token}", opened.headers
            assert session_cookie(opened) is None
        page = self.http.get(f"/sign-in/confirm?token={token}")
        assert page.status_code == 200 and page.headers["cache-control"] == "no-store", page.headers
        assert 'action="/v1/auth/email/confirm"' in page.text and token in page.text
        elsewhere = self.http.get(link)
        assert elsewhere.headers["location"] == "/sign-in?error=link_other_browser", elsewhere.headers
        for other in (None, "svc_signin=" + "0" * 64):  # no binding, someone else's
            r = confirm_link(self.base, link, other)
            assert r.status_code in (302, 303), r.status_code
            assert r.headers["location"] == "/sign-in?error=link_other_browser", (other, r.headers)
            assert session_cookie(r) is None
            posted = self.http.post("/v1/auth/email/confirm", data={"token": token},
                                    headers={"cookie": other} if other else {})
            assert posted.status_code == 303, posted.status_code
            assert posted.headers["location"] == "/sign-in?error=link_other_browser", posted.headers
            assert session_cookie(posted) is None
        # The browser that asked still can.
        r = confirm_link(self.base, link, binding)
        assert r.status_code == 303 and r.headers["location"] == "/account", (r.status_code, r.headers)
        cookie = session_cookie(r)
        self.secrets.append(cookie.split(";")[0].split("=", 1)[1])
        me = self.http.get("/v1/me", headers={"cookie": cookie.split(";")[0]})
        assert me.json()["results"][0]["email"] == address, me.text

    def the_answer_does_not_say_whether_an_account_exists(self):
        known = f"known-{uuid.uuid4().hex[:8]}@example.com"
        self.sign_in(known)
        unknown = f"unknown-{uuid.uuid4().hex[:8]}@example.com"
        answers = []
        for address in (known, unknown):
            r = self.http.post("/v1/auth/email/start", json={"email": address})
            assert r.status_code == 200, r.text
            body = r.json()
            body.pop("request_id")
            body["results"][0].pop("email")
            answers.append(body)
            self.secrets.append(self.inbox.link_for(address).rsplit("=", 1)[1])
        assert answers[0] == answers[1], answers

    def a_sixth_link_within_the_window_is_429(self):
        address = f"many-{uuid.uuid4().hex[:8]}@example.com"
        for n in range(5):
            r = self.http.post("/v1/auth/email/start", json={"email": address})
            assert r.status_code == 200, (n, r.text)
            self.secrets.append(self.inbox.link_for(address).rsplit("=", 1)[1])
        r = self.http.post("/v1/auth/email/start", json={"email": address})
        assert r.status_code == 429, r.text
        assert r.json()["error"]["code"] == "rate_limited"
        assert int(r.headers["retry-after"]) >= 1

    def keys_are_made_used_and_revoked_with_the_session(self):
        address = f"keys-{uuid.uuid4().hex[:8]}@example.com"
        _, cookie = self.sign_in(address)
        c = {"cookie": cookie.split(";")[0]}
        made = self.http.post("/v1/keys", headers=c, json={"name": "notebook"})
        assert made.status_code == 200, made.text
        key = made.json()["results"][0]
        secret = key["secret"]
        self.secrets.append(secret)
        listed = self.http.get("/v1/keys", headers=c)
        assert secret not in listed.text and key["id"] in listed.text
        bearer = {"authorization": f"Bearer {secret}"}
        news = self.http.get("/v1/news", params={"cik": "320193", "as_of": "2026-11-01T00:00:00Z"}, headers=bearer)
        assert news.status_code in (200, 409), news.text
        # A key cannot make keys.
        r = self.http.post("/v1/keys", headers=bearer, json={"name": "x"})
        assert r.status_code == 401, r.text
        gone = self.http.delete(f"/v1/keys/{key['id']}", headers=c)
        assert gone.status_code == 200 and gone.json()["results"][0]["revoked_at"], gone.text
        refused = self.http.get("/v1/news", params={"cik": "320193", "as_of": "2026-11-01T00:00:00Z"}, headers=bearer)
        assert refused.status_code == 401, refused.text
        out = self.http.post("/v1/auth/logout", headers=c)
        assert out.status_code == 200, out.text
        assert self.http.get("/v1/me", headers=c).status_code == 401

    def provider_flow(self, forge_state=False, drop_flow=False, slot="provider_a", binding=None, planted=False):
        """A browser through a provider: start, the provider's authorize redirect, callback.
        The browser keeps the binding cookie the start set (`svc_signin`) unless `binding`
        names another; `planted`: the flow was started in another browser (the attacker's,
        whose flow cookie a sibling subdomain could plant) and the callback comes from this
        one, with its own binding."""
        start = self.http.get(f"/v1/auth/{slot}/start")
        assert start.status_code == 302, start.text
        flow = next((v for v in start.headers.get_list("set-cookie") if v.startswith("svc_oauth=")), None)
        assert flow and "HttpOnly" in flow and "Path=/;" in flow, start.headers
        own = set_cookie(start, "svc_signin").split(";")[0]
        self.secrets.append(own.split("=", 1)[1])
        if planted:
            victim = self.http.get(f"/v1/auth/{slot}/start")
            own = set_cookie(victim, "svc_signin").split(";")[0]
            self.secrets.append(own.split("=", 1)[1])
        at_provider = httpx.get(start.headers["location"], follow_redirects=False, timeout=10)
        assert at_provider.status_code == 302, at_provider.text
        back = at_provider.headers["location"]
        assert back.startswith(self.base + f"/v1/auth/{slot}/callback?"), back
        q = dict(httpx.URL(back).params)
        if "code" in q:
            self.secrets.append(q["code"])
        if forge_state:
            q["state"] = q.get("state", "") + "x"
        cookies = [] if drop_flow else [flow.split(";")[0]]
        cookies.append(binding or own)
        headers = {"cookie": "; ".join(cookies)} if cookies else {}
        return self.http.get(f"/v1/auth/{slot}/callback", params=q, headers=headers)

    def a_first_provider_sign_in_makes_an_account_for_its_identity(self):
        address = f"new-{uuid.uuid4().hex[:8]}@example.com"
        self.provider.set(f"ok fresh-{uuid.uuid4().hex[:8]} {address}")
        r = self.provider_flow()
        assert r.status_code == 302 and r.headers["location"] == "/account", (r.status_code, r.headers)
        session = session_cookie(r)
        self.secrets.append(session.split(";")[0].split("=", 1)[1])
        me = self.http.get("/v1/me", headers={"cookie": session.split(";")[0]}).json()["results"][0]
        assert me["email"] == address and me["plan"] == "researcher", me
        self.provider.set("ok")

    def providers_join_the_email_account_only_once_the_address_is_proven(self):
        self.provider.set("ok")
        _, cookie = self.sign_in(self.shared_email)
        by_link = self.http.get("/v1/me", headers={"cookie": cookie.split(";")[0]}).json()["results"][0]
        # The provider vouches for an address that has an account made by e-mail: no session
        # on its word alone; a link is mailed to the address instead.
        r = self.provider_flow()
        assert r.status_code == 302 and r.headers["location"] == "/sign-in?notice=join_link_sent", (r.status_code, r.headers)
        assert session_cookie(r) is None
        cleared = [v for v in r.headers.get_list("set-cookie") if v.startswith("svc_oauth=")]
        assert cleared and "Max-Age=0" in cleared[0], "the flow cookie is single use"
        binding = set_cookie(r, "svc_signin").split(";")[0]
        self.secrets.append(binding.split("=", 1)[1])
        link = self.inbox.link_for(self.shared_email)
        self.secrets.append(link.rsplit("=", 1)[1])
        # Whoever holds the provider account but not the mailbox's browser gets nothing.
        stranger = confirm_link(self.base, link, None)
        assert stranger.headers["location"] == "/sign-in?error=link_other_browser", stranger.headers
        r = confirm_link(self.base, link, binding)
        assert r.status_code == 303 and r.headers["location"] == "/account", (r.status_code, r.headers)
        session = session_cookie(r)
        self.secrets.append(session.split(";")[0].split("=", 1)[1])
        me = self.http.get("/v1/me", headers={"cookie": session.split(";")[0]}).json()["results"][0]
        assert me["user_id"] == by_link["user_id"], (me, by_link)
        # Joined: the next sign-in with the provider goes straight in.
        r = self.provider_flow()
        assert r.status_code == 302 and r.headers["location"] == "/account", (r.status_code, r.headers)
        session = session_cookie(r)
        self.secrets.append(session.split(";")[0].split("=", 1)[1])
        me = self.http.get("/v1/me", headers={"cookie": session.split(";")[0]}).json()["results"][0]
        assert me["user_id"] == by_link["user_id"] and me["email"] == self.shared_email, (me, by_link)
        # Provider B (another client of the same provider, so the same issuer and subject)
        # reaches the same account too, and a flow started for A is not accepted by B's
        # callback.
        r = self.provider_flow(slot="provider_b")
        assert r.status_code == 302 and r.headers["location"] == "/account", (r.status_code, r.headers)
        session = session_cookie(r)
        self.secrets.append(session.split(";")[0].split("=", 1)[1])
        me_b = self.http.get("/v1/me", headers={"cookie": session.split(";")[0]}).json()["results"][0]
        assert me_b["user_id"] == by_link["user_id"], (me_b, by_link)
        start_a = self.http.get("/v1/auth/provider_a/start")
        flow_a = next(v for v in start_a.headers.get_list("set-cookie") if v.startswith("svc_oauth="))
        at_provider = httpx.get(start_a.headers["location"], follow_redirects=False, timeout=10)
        q = dict(httpx.URL(at_provider.headers["location"]).params)
        self.secrets.append(q["code"])
        crossed = self.http.get("/v1/auth/provider_b/callback", params=q, headers={"cookie": flow_a.split(";")[0]})
        assert crossed.headers["location"] == "/sign-in?error=provider_state", crossed.headers
        assert session_cookie(crossed) is None

    def a_bad_provider_callback_never_signs_anyone_in(self):
        for mode, kwargs, reason in [
            ("ok", {"forge_state": True}, "provider_state"),
            ("ok", {"drop_flow": True}, "provider_state"),
            # A flow cookie planted in the victim's browser: its binding is the planter's.
            ("ok", {"planted": True}, "provider_state"),
            ("other-key", {}, "provider_token"),
            ("wrong-nonce", {}, "provider_token"),
            ("denied", {}, "provider_denied"),
            ("unverified", {}, "email_unverified"),
        ]:
            self.provider.set(mode)
            r = self.provider_flow(**kwargs)
            assert r.status_code == 302, (mode, r.status_code, r.text)
            assert r.headers["location"] == f"/sign-in?error={reason}", (mode, kwargs, r.headers["location"])
            assert session_cookie(r) is None, (mode, kwargs)
        self.provider.set("ok")

    def no_secret_in_the_log_or_the_store_in_clear(self):
        assert len(self.secrets) >= 10, self.secrets
        self.secrets.append("s3cret-of-the-client")
        with open(self.server.log_path, encoding="utf-8", errors="replace") as f:
            log = f.read()
        assert "TRACE" in log or "trace" in log.lower(), "the server logged at trace level"
        leaked = [s for s in self.secrets if s in log]
        # Name where, never what: the line with the secret blanked out.
        where = [next(line for line in log.splitlines() if s in line).replace(s, "<SECRET>")[:300] for s in leaked]
        assert not leaked, f"secrets in the log: {len(leaked)}: {where}"
        stored = self.store_text()
        assert stored, "the store was read"
        leaked = [s for s in self.secrets if s in stored]
        assert not leaked, f"secrets in the state store in clear: {len(leaked)}"

    def store_text(self):
        if self.db.startswith("sqlite://"):
            path = self.db[len("sqlite://"):]
            text = ""
            for p in (path, path + "-wal"):
                if os.path.exists(p):
                    with open(p, "rb") as f:
                        text += f.read().decode("latin-1")
            return text
        out = subprocess.run(
            ["psql", self.db, "-At", "-c",
             "SELECT string_agg(t::text, E'\\n') FROM (SELECT row_to_json(x)::text AS t FROM users x "
             "UNION ALL SELECT row_to_json(x)::text FROM api_keys x "
             "UNION ALL SELECT row_to_json(x)::text FROM sign_in_links x "
             "UNION ALL SELECT row_to_json(x)::text FROM identities x "
             "UNION ALL SELECT row_to_json(x)::text FROM sessions x "
             "UNION ALL SELECT row_to_json(x)::text FROM rate_windows x "
             "UNION ALL SELECT row_to_json(x)::text FROM secrets x) s"],
            check=True, capture_output=True, text=True,
        )
        return out.stdout


def run_all(binary, workdir, db, node, module):
    run = Run(binary, workdir, db, node, module)
    results = []
    try:
        for name in [
            "a_link_signs_in_once",
            "a_link_opened_elsewhere_or_prefetched_signs_nobody_in",
            "the_answer_does_not_say_whether_an_account_exists",
            "a_sixth_link_within_the_window_is_429",
            "keys_are_made_used_and_revoked_with_the_session",
            "a_first_provider_sign_in_makes_an_account_for_its_identity",
            "providers_join_the_email_account_only_once_the_address_is_proven",
            "a_bad_provider_callback_never_signs_anyone_in",
            "no_secret_in_the_log_or_the_store_in_clear",
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


def drop_database(name):
    """Drops a database `postgres_database` made (connections still open are closed)."""
    subprocess.run(["psql", PG, "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], capture_output=True)


def postgres_database():
    """A fresh database on the machine's PostgreSQL, or None when there is none."""
    name = f"asof_signin_{uuid.uuid4().hex[:12]}"
    r = subprocess.run(["psql", PG, "-c", f"CREATE DATABASE {name}"], capture_output=True, text=True)
    if r.returncode != 0:
        return None, None
    return name, PG.rsplit("/", 1)[0] + "/" + name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--node", default="node")
    ap.add_argument("--oauth2-mock-server", required=True, help="path of the package's dist/index.mjs")
    args = ap.parse_args()
    tools = (args.node, args.oauth2_mock_server)
    results = []
    with tempfile.TemporaryDirectory(prefix="asof-signin-") as d:
        results += run_all(args.bin, d, f"sqlite://{d}/state.db", *tools)
    name, url = postgres_database()
    if url is None:
        if os.environ.get("ASOF_REQUIRE_POSTGRES"):
            print("test postgres::* ... FAILED: PostgreSQL required but unreachable")
            results.append(False)
        else:
            print("SKIPPED: postgres sign-in checks (no PostgreSQL)")
    else:
        try:
            with tempfile.TemporaryDirectory(prefix="asof-signin-pg-") as d:
                results += run_all(args.bin, d, url, *tools)
        finally:
            drop_database(name)
    passed = sum(results)
    print(f"signin clients: {passed} passed, {len(results) - passed} failed")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
