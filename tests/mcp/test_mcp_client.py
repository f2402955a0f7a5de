"""The MCP endpoint driven by the official MCP Python SDK over Streamable HTTP.

Starts the real `asof serve` on a free port with a fresh SQLite state store, mints keys with
`asof keys create`, then checks what an agent sees: both protocol versions, the four read-only
tools, every tool with and without a key, a bare-date refusal, a rejected key (-32001), the
REST/MCP envelope equality and the shared rate limit. Run by scripts/test-all:

    python tests/mcp/test_mcp_client.py --bin target/debug/asof
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import traceback

import httpx2
import mcp.client.session as client_session
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

TOOLS = ["svc_query", "svc_diff", "svc_coverage", "svc_meta"]
CUT = "2026-01-29T12:00:00Z"
KEYED_ARGS = {
    "svc_query": {"ticker": "TSLA", "as_of": CUT, "limit": 5},
    "svc_diff": {"cik": "789019", "as_of_start": "2026-01-27T00:00:00Z", "as_of_end": "2026-02-03T00:00:00Z"},
    "svc_coverage": {"date": "2026-01-29", "as_of": "2026-02-01T00:00:00Z"},
    "svc_meta": {},
}
SAMPLE_ARGS = {
    "svc_query": {"ticker": "TSLA", "as_of": "2026-02-06T23:59:59Z"},
    "svc_diff": {"ticker": "MSFT", "as_of_start": "2026-01-27T00:00:00Z", "as_of_end": "2026-02-03T00:00:00Z"},
    "svc_coverage": {"example": "siemens-energy"},
    "svc_meta": {},
}
REST = {
    "svc_query": "/v1/news?ticker=TSLA&as_of=2026-01-29T12:00:00Z&limit=5",
    "svc_diff": "/v1/news/diff?cik=789019&as_of_start=2026-01-27T00:00:00Z&as_of_end=2026-02-03T00:00:00Z",
    "svc_coverage": "/v1/coverage?date=2026-01-29&as_of=2026-02-01T00:00:00Z",
    "svc_meta": "/v1/meta",
}


class Server:
    """`asof serve` on 127.0.0.1:0; ready when it prints its listening line (no fixed sleep)."""

    def __init__(self, binary, corpus=None):
        self.dir = tempfile.TemporaryDirectory()
        self.db = f"sqlite://{self.dir.name}/state.db"
        env = dict(os.environ, ASOF_LOG="error")
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--database-url", self.db]
            + (["--corpus", corpus] if corpus else []),
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
        )
        self.binary = binary
        for line in self.proc.stderr:
            if line.startswith("asof listening on http://"):
                self.base = line.strip().removeprefix("asof listening on ")
                break
        else:
            raise RuntimeError("server exited before listening")
        # Keep draining stderr so the server never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        self.url = self.base + "/mcp"

    def key(self, email, plan):
        out = subprocess.run(
            [self.binary, "keys", "create", "--database-url", self.db, "--email", email, "--plan", plan],
            check=True, capture_output=True, text=True,
        )
        return out.stdout.strip().splitlines()[-1]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.dir.cleanup()


def headers(key):
    return {"Authorization": f"Bearer {key}"} if key else {}


def connect(srv, http, mode="legacy"):
    return Client(streamable_http_client(srv.url, http_client=http), mode=mode)


def envelope(result):
    return json.loads(result.content[0].text)


def without_request_id(env):
    return {k: v for k, v in env.items() if k != "request_id"}


def mcp_error(exc):
    """The MCPError inside whatever the SDK raised (it may wrap errors in exception groups)."""
    if isinstance(exc, MCPError):
        return exc
    for sub in getattr(exc, "exceptions", ()):
        found = mcp_error(sub)
        if found is not None:
            return found
    return None


async def initialize_with_each_protocol_version(srv, keys):
    for version in ["2025-06-18", "2025-03-26"]:
        # The SDK offers its newest handshake version; make it offer the one under test.
        saved = client_session.LATEST_HANDSHAKE_VERSION
        client_session.LATEST_HANDSHAKE_VERSION = version
        try:
            async with httpx2.AsyncClient(headers=headers(keys["researcher"])) as http:
                async with connect(srv, http) as c:
                    assert c.protocol_version == version, c.protocol_version
                    caps = c.server_capabilities
                    assert caps.tools is not None and caps.resources is None and caps.prompts is None
                    listed = (await c.list_tools()).tools
                    assert [t.name for t in listed] == TOOLS, [t.name for t in listed]
                    assert all(t.annotations.read_only_hint for t in listed)
        finally:
            client_session.LATEST_HANDSHAKE_VERSION = saved


async def sdk_default_mode_falls_back_to_the_handshake(srv, keys):
    async with httpx2.AsyncClient() as http:
        async with connect(srv, http, mode="auto") as c:
            assert c.protocol_version == "2025-06-18", c.protocol_version
            assert len((await c.list_tools()).tools) == 4


async def every_tool_answers_with_a_key(srv, keys):
    async with httpx2.AsyncClient(headers=headers(keys["researcher"])) as http:
        async with connect(srv, http) as c:
            for tool in TOOLS:
                r = await c.call_tool(tool, KEYED_ARGS[tool])
                assert not r.is_error, (tool, r.content[0].text[:300])
                env = envelope(r)
                assert env["status"] == "ok" and "sample" not in env, (tool, env)


async def every_tool_answers_from_the_sample_without_a_key(srv, keys):
    async with httpx2.AsyncClient() as http:
        async with connect(srv, http) as c:
            for tool in TOOLS:
                r = await c.call_tool(tool, SAMPLE_ARGS[tool])
                assert not r.is_error, (tool, r.content[0].text[:300])
                env = envelope(r)
                if tool != "svc_meta":
                    assert env["sample"] is True, (tool, env)


async def a_bare_date_is_an_invalid_clock_tool_error(srv, keys):
    for key in [keys["researcher"], None]:
        async with httpx2.AsyncClient(headers=headers(key)) as http:
            async with connect(srv, http) as c:
                r = await c.call_tool("svc_query", {"ticker": "TSLA", "as_of": "2026-01-29"})
                assert r.is_error
                env = envelope(r)
                assert env["error"]["code"] == "invalid_clock" and env["error"]["param"] == "as_of", env
                assert env["count"] is None


async def a_rejected_key_is_json_rpc_error_32001(srv, keys):
    bogus = "svc_live_" + "0" * 64
    # At the handshake...
    try:
        async with httpx2.AsyncClient(headers=headers(bogus)) as http:
            async with connect(srv, http):
                pass
        raise AssertionError("initialize with a rejected key succeeded")
    except Exception as e:  # noqa: BLE001 - the SDK may wrap the error in exception groups
        err = mcp_error(e)
        assert err is not None and err.code == -32001, repr(e)
    # ...and on a tool call once the key stops being valid mid-session.
    async with httpx2.AsyncClient(headers=headers(keys["researcher"])) as http:
        async with connect(srv, http) as c:
            http.headers["Authorization"] = f"Bearer {bogus}"
            try:
                r = await c.call_tool("svc_query", KEYED_ARGS["svc_query"])
                raise AssertionError(f"tool call with a rejected key answered: {r}")
            except Exception as e:  # noqa: BLE001
                err = mcp_error(e)
                assert err is not None and err.code == -32001, repr(e)


async def a_tool_envelope_equals_the_rest_envelope(srv, keys):
    key = keys["researcher"]
    async with httpx2.AsyncClient(headers=headers(key)) as http:
        async with connect(srv, http) as c:
            for tool in TOOLS:
                r = await c.call_tool(tool, KEYED_ARGS[tool])
                rest = (await http.get(srv.base + REST[tool])).json()
                assert without_request_id(envelope(r)) == without_request_id(rest), tool


async def tool_calls_consume_the_keys_rate_limit(srv, keys):
    key = srv.key("ratelimit@example.com", "researcher")
    async with httpx2.AsyncClient(headers=headers(key)) as http:
        async with connect(srv, http) as c:
            # Measured inside one fixed window; if a minute boundary falls in between, again.
            for _ in range(3):
                first = await http.get(srv.base + REST["svc_coverage"])
                for _ in range(3):
                    await c.call_tool("svc_coverage", KEYED_ARGS["svc_coverage"])
                last = await http.get(srv.base + REST["svc_coverage"])
                if first.headers["x-ratelimit-reset"] == last.headers["x-ratelimit-reset"]:
                    used = int(first.headers["x-ratelimit-remaining"]) - int(last.headers["x-ratelimit-remaining"])
                    assert used == 4, f"three tool calls and one REST call used {used}"
                    return
        raise AssertionError("no measurement fell inside one rate-limit window")


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def two_versions(binary, work):
    """A copy of the sample with a second version on top (a CFTC week ingested by the real
    binary): the sample's version is then a past one. Returns (corpus, first, second)."""
    import shutil

    corpus = os.path.join(work, "corpus")
    for part in ("manifests", "snapshots"):
        shutil.copytree(os.path.join(REPO, part), os.path.join(corpus, part),
                        ignore=shutil.ignore_patterns("sources"))
    first = open(os.path.join(corpus, "manifests", "CURRENT")).read().strip()
    week = os.path.join(REPO, "snapshots/sources/us.cftc.cot/legacy_futures_only_2025_weekly_asof",
                        "annual.txt.committed_2025-01-17")
    subprocess.run([binary, "ingest", "--corpus", corpus, "--source", "us.cftc.cot",
                    "--commit-time", "2026-11-20T00:00:00Z", week], check=True, capture_output=True)
    second = open(os.path.join(corpus, "manifests", "CURRENT")).read().strip()
    assert first != second, "the ingest published a second version"
    return corpus, first, second


async def tools_answer_a_pinned_corpus_version(srv, keys):
    """Every tool takes `corpus_version`: pinned to a past version each answers what the REST
    route pinned to it answers (that version named), and a version never published is an
    `isError` result with `corpus_version_unknown`."""
    with tempfile.TemporaryDirectory() as work:
        corpus, first, second = two_versions(srv.binary, work)
        pinned_srv = Server(srv.binary, corpus)
        try:
            key = pinned_srv.key("pins@example.com", "researcher")
            args, rest = KEYED_ARGS, REST
            async with httpx2.AsyncClient(headers=headers(key)) as http:
                async with connect(pinned_srv, http) as c:
                    listed = {t.name: t for t in (await c.list_tools()).tools}
                    for tool in TOOLS:
                        props = listed[tool].input_schema["properties"]
                        assert "corpus_version" in props, (tool, sorted(props))
                    answers = {}
                    for tool in TOOLS:
                        for version in (first, second):
                            r = await c.call_tool(tool, {**args[tool], "corpus_version": version})
                            env = envelope(r)
                            sep = "&" if "?" in rest[tool] else "?"
                            want = (await http.get(f"{pinned_srv.base}{rest[tool]}{sep}corpus_version={version}")).json()
                            assert not r.is_error, (tool, env)
                            assert env["corpus_version"] == version, (tool, env["corpus_version"])
                            assert without_request_id(env) == without_request_id(want), (tool, version)
                            answers[(tool, version)] = without_request_id(env)
                    assert answers[("svc_meta", first)] != answers[("svc_meta", second)], \
                        "each version's meta names it: the two answer apart"
                    unknown = "sha256:" + "cd" * 32
                    r = await c.call_tool("svc_query", {**args["svc_query"], "corpus_version": unknown})
                    env = envelope(r)
                    assert r.is_error and env["error"]["code"] == "corpus_version_unknown", env
                    assert env["error"]["param"] == "corpus_version", env
        finally:
            pinned_srv.stop()


CHECKS = [
    initialize_with_each_protocol_version,
    sdk_default_mode_falls_back_to_the_handshake,
    every_tool_answers_with_a_key,
    every_tool_answers_from_the_sample_without_a_key,
    a_bare_date_is_an_invalid_clock_tool_error,
    a_rejected_key_is_json_rpc_error_32001,
    a_tool_envelope_equals_the_rest_envelope,
    tool_calls_consume_the_keys_rate_limit,
    tools_answer_a_pinned_corpus_version,
]


async def run(srv, keys):
    failed = 0
    for check in CHECKS:
        try:
            await check(srv, keys)
            print(f"test mcp_client::{check.__name__} ... ok")
        except Exception:  # noqa: BLE001 - report every failing check, then fail the run
            failed += 1
            print(f"test mcp_client::{check.__name__} ... FAILED")
            traceback.print_exc()
    print(f"mcp client checks: {len(CHECKS) - failed} passed; {failed} failed")
    return failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="path to the asof binary")
    args = ap.parse_args()
    srv = Server(args.bin)
    try:
        keys = {"researcher": srv.key("mcp@example.com", "researcher")}
        failed = asyncio.run(run(srv, keys))
    finally:
        srv.stop()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
