"""Helpers the Python client checks share: a real `asof serve` on a free loopback port (ready
when /health answers, never after a fixed sleep), API keys made with `asof keys create`, and
DuckDB with an extension loaded from the file its PyPI package installed."""

import glob
import os
import re
import socket
import subprocess
import time
import urllib.request
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def duckdb_with(extension):
    """A DuckDB connection (`duckdb==1.4.4`) with `extension` (`httpfs`, `delta`) loaded from the
    file the `duckdb-ext-<extension>` package installed: never fetched at run time."""
    import duckdb
    import duckdb_ext  # a namespace package: its files sit under __path__

    found = [
        p
        for base in duckdb_ext.__path__
        for p in glob.glob(os.path.join(base, "extensions", "v1.4.4", "*", f"{extension}.duckdb_extension"))
    ]
    if not found:
        raise RuntimeError(f"duckdb-ext-{extension} installed no {extension}.duckdb_extension for v1.4.4")
    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute(f"LOAD '{found[0]}'")
    return con


def http_get(url, timeout=5, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def set_cookie(res, name):
    """The `Set-Cookie` value a response gives cookie `name` (with or without the `__Host-`
    prefix a Secure server uses), or None."""
    for v in res.headers.get_list("set-cookie"):
        if v.startswith((f"{name}=", f"__Host-{name}=")):
            return v
    return None


def session_cookie(res):
    """The session `Set-Cookie` of a response (`svc_session` or `__Host-svc_session`)."""
    return set_cookie(res, "svc_session")


def confirm_link(base, link, binding):
    """What a browser holding the sign-in binding cookie `binding` (`name=value`, or None for
    another browser) does with a mailed link: opens it (a 302 to the confirmation page), reads
    the page's form and presses its button. Returns the answer to the button's POST (a 303)."""
    import httpx

    cookies = {"cookie": binding} if binding else {}
    opened = httpx.get(link, headers=cookies, follow_redirects=False, timeout=10)
    where = opened.headers.get("location", "")
    if not where.startswith("/sign-in/confirm?"):
        return opened
    page = httpx.get(base + where, headers=cookies, timeout=10)
    token = re.search(r'name="token" value="([0-9a-f]{64})"', page.text)
    assert page.status_code == 200 and token, (page.status_code, page.text[:300])
    return httpx.post(base + "/v1/auth/email/confirm", data={"token": token.group(1)},
                      headers=cookies, follow_redirects=False, timeout=10)


def email_sign_in(base, address, inbox):
    """Signs `address` in by e-mail link as a browser does (ask, open the mailed link, press
    the confirmation page's button); returns (link, binding cookie, session `Set-Cookie`)."""
    import httpx

    r = httpx.post(base + "/v1/auth/email/start", json={"email": address}, timeout=10)
    assert r.status_code == 200, r.text
    binding = set_cookie(r, "svc_signin").split(";")[0]
    link = inbox.link_for(address)
    r = confirm_link(base, link, binding)
    assert r.status_code == 303 and r.headers["location"] == "/account", (r.status_code, dict(r.headers))
    cookie = session_cookie(r)
    assert cookie, dict(r.headers)
    return link, binding, cookie


class Server:
    """`asof serve` over `corpus` (the shipped sample by default) with a fresh SQLite state
    store in `workdir`; `env` adds environment variables (object-store credentials)."""

    def __init__(self, binary, workdir, corpus=REPO, extra=(), env=None, port=None, db=None):
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.db = db or f"sqlite://{workdir}/state.db"
        self.log_path = os.path.join(workdir, f"server-{self.port}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--corpus", corpus,
             "--database-url", self.db, *extra],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env={**os.environ, **(env or {})},
        )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}")
            try:
                if http_get(self.base + "/health", timeout=1)[0] == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("server not ready after 60 s")
            time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class Balancer:
    """HAProxy in the foreground on deploy/haproxy/haproxy.cfg, unchanged (its addresses come
    from the environment): round robin over two replicas' `backends` (ports on 127.0.0.1),
    health by `/ready`, naming the replica that answered in `X-Replica`. Ready when both have
    answered through it (their health checks passed)."""

    def __init__(self, binary, work, backends, port=None):
        assert len(backends) == 2, "deploy/haproxy/haproxy.cfg names two replicas"
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cfg = os.path.join(REPO, "deploy", "haproxy", "haproxy.cfg")
        env = {**os.environ, "ASOF_LB_BIND": f"127.0.0.1:{self.port}",
               "ASOF_REPLICA_1": f"127.0.0.1:{backends[0]}", "ASOF_REPLICA_2": f"127.0.0.1:{backends[1]}"}
        self.log_path = os.path.join(work, "haproxy.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([binary, "-db", "-f", cfg], stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        seen = set()
        while seen != {"r1", "r2"}:
            if time.monotonic() > deadline:
                raise RuntimeError(f"HAProxy did not reach every replica: {seen}")
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=2) as r:
                    if r.status == 200 and r.headers.get("x-replica"):
                        seen.add(r.headers["x-replica"])
            except OSError:
                pass
            time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


def create_key(binary, db, plan):
    """A key of a new account on `plan`: a client of its own, whose requests count against no
    other key's allowance (a plan's rate limit is the account's, all its keys together)."""
    email = f"{plan}-{uuid.uuid4().hex[:12]}@clients.test"
    out = subprocess.run(
        [binary, "keys", "create", "--database-url", db, "--email", email, "--plan", plan],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.strip().splitlines()[-1]


class FakeProcessor:
    """The Stripe-shaped payment processor of test-support (`asof-fake-processor`) on a free
    loopback port, with its `/_fake/...` controls."""

    def __init__(self, binary):
        self.proc = subprocess.Popen([binary], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening "):
            raise RuntimeError(f"fake processor did not start: {line!r}")
        self.url = line.split()[1]

    def post(self, path, **params):
        import httpx  # the venv's; only the billing checks need it

        r = httpx.post(self.url + path, params=params, timeout=10)
        assert r.status_code == 200, (path, r.status_code, r.text)
        return r.json()

    def requests(self):
        import httpx

        return httpx.get(self.url + "/_fake/requests", timeout=10).json()

    def stop(self):
        self.proc.kill()
        self.proc.wait()
