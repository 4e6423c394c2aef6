"""Interop over Streamable HTTP (issue 25): the official MCP Python SDK client through
`mcpwall serve` to server-everything (stdio), compared with the direct stdio connection,
and the gateway's refusals: bearer tokens, session ownership, Origin, DELETE, the
protocol version header; and stateless (2026-07-28) clients, as plain HTTP requests
(the SDK has no such client), served per identity on the same listener.

Usage: http_gateway.py MCPWALL_BINARY
Run from tests/http_gateway.rs. Every token and credential here is generated at run time;
the network is loopback only.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from interop import BIN, STEP_TIMEOUT, Env, check, everything_transcript, fake_aws_key_id, text_of

EVERYTHING = [str(BIN / "mcp-server-everything"), "stdio"]
ACCEPT = "application/json, text/event-stream"


@contextmanager
def gateway(env: Env, server: list[str], extra_env: dict | None = None, policy: Path | None = None):
    """`mcpwall serve` on a free loopback port; yields its endpoint URL."""
    proc = subprocess.Popen(
        [env.mcpwall, "serve", "--listen", "127.0.0.1:0", "-c", str(policy or env.policy),
         "--server-name", "everything", "--", *server],
        env={"HOME": str(env.home), "PATH": os.environ.get("PATH", ""), **(extra_env or {})},
        cwd=str(env.project),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = None
    for line in proc.stderr:
        sys.stderr.write(f"  [serve] {line}")
        m = re.search(r"serving (http://\S+/mcp)", line)
        if m:
            url = m.group(1)
            break
    if url is None:
        proc.wait()
        raise AssertionError(f"mcpwall serve did not start (exit {proc.returncode})")
    # Keep reading its stderr so it never blocks on a full pipe.
    threading.Thread(target=lambda: [sys.stderr.write(f"  [serve] {l}") for l in proc.stderr], daemon=True).start()
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("mcpwall serve did not exit within 15 s of SIGTERM")


def connect(url: str, token: str | None = None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    @asynccontextmanager
    async def open_transport():
        async with httpx2.AsyncClient(headers=headers, timeout=STEP_TIMEOUT) as client:
            async with streamable_http_client(url, http_client=client) as streams:
                yield streams[0], streams[1]

    return open_transport


def init_body(n: int = 1) -> dict:
    return {
        "jsonrpc": "2.0", "id": n, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}},
    }


def call_body(n: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": message}}}


def post(url: str, body: dict, token: str | None = None, session: str | None = None, **extra) -> httpx2.Response:
    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if session:
        headers["Mcp-Session-Id"] = session
        headers["MCP-Protocol-Version"] = "2025-11-25"
    headers.update(extra)
    return httpx2.post(url, headers=headers, content=json.dumps(body), timeout=STEP_TIMEOUT)


def answer_of(response: httpx2.Response) -> dict:
    """The JSON-RPC answer of a POST, whether sent as JSON or as an SSE stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data: "):
                message = json.loads(line[6:])
                if "method" not in message:
                    return message
        raise AssertionError(f"no answer in the SSE stream: {response.text[:400]}")
    return response.json()


def open_raw_session(url: str, token: str | None) -> str:
    r = post(url, init_body(), token)
    check(r.status_code == 200 and "mcp-session-id" in r.headers, f"initialize opens a session ({r.status_code})")
    session = r.headers["mcp-session-id"]
    n = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token, session)
    check(n.status_code == 202, "notifications/initialized is accepted (202)")
    return session


def audit_events(env: Env) -> list[dict]:
    text = "".join(p.read_text() for p in sorted(env.logs.glob("*.jsonl")))
    return [json.loads(l) for l in text.splitlines()]


async def transcript_over_http(env: Env) -> None:
    print("server-everything: direct (stdio) vs the SDK's Streamable HTTP client through mcpwall serve")
    direct = await everything_transcript(env, False)
    with gateway(env, EVERYTHING) as url:
        over_http = await everything_transcript(env, True, connect(url))
    check(direct["logging-seen"] and direct["progress-seen"] and direct["sampling-seen"],
          "the direct run exercised logging, progress and sampling")
    for key in direct:
        if direct[key] != over_http[key]:
            print(f"  DIFF in {key}:\n    direct: {json.dumps(direct[key])[:600]}\n    http:   {json.dumps(over_http[key])[:600]}")
        check(direct[key] == over_http[key], f"{key} is the same directly and over HTTP through mcpwall")
    events = [e for e in audit_events(env) if e.get("transport") == "http"]
    check(any(e["method"] == "tools/call" and e["action"] == "allow" for e in events),
          "the gateway's decisions are audited with transport: http")


async def transcript_over_legacy_sse(env: Env) -> None:
    print("server-everything: direct (stdio) vs the SDK's legacy HTTP+SSE client through mcpwall serve")
    direct = await everything_transcript(env, False)
    with gateway(env, EVERYTHING) as url:
        sse_url = url.removesuffix("/mcp") + "/sse"
        over_sse = await everything_transcript(env, True, lambda: sse_client(sse_url, timeout=STEP_TIMEOUT))
    for key in direct:
        if direct[key] != over_sse[key]:
            print(f"  DIFF in {key}:\n    direct: {json.dumps(direct[key])[:600]}\n    sse:    {json.dumps(over_sse[key])[:600]}")
        check(direct[key] == over_sse[key], f"{key} is the same directly and over legacy SSE through mcpwall")


async def refusals_over_http(env: Env) -> None:
    print("policy over HTTP: denials and redactions reach the SDK client as over stdio")
    aws = fake_aws_key_id()
    # The server's environment (get-env) carries a fake key: its answer must come back redacted.
    with gateway(env, EVERYTHING, {"INTEROP_FAKE_KEY": aws}) as url:
        async with connect(url)() as (r, w):
            async with ClientSession(r, w) as s:
                with anyio.fail_after(STEP_TIMEOUT):
                    await s.initialize()
                    try:
                        await s.call_tool("echo", {"message": str(env.home / ".ssh" / "id_rsa")})
                        raise AssertionError("an argument naming ~/.ssh was not denied over HTTP")
                    except MCPError as e:
                        check(e.code == -32001, f"a denied call is refused over HTTP ({e.message})")
                    shown = text_of(await s.call_tool("get-env", {}))
                    check(aws not in shown and "[REDACTED BY MCPWALL]" in shown and "INTEROP_FAKE_KEY" in shown,
                          "a secret in a response is redacted before it reaches the HTTP client")
    check(aws not in json.dumps(audit_events(env)), "no secret reaches the audit log")


async def identities(env: Env) -> None:
    print("identities: bearer tokens, session ownership")

    def issue(name: str) -> str:
        out = subprocess.run([env.mcpwall, "token", "add", name], env={"HOME": str(env.home), "PATH": os.environ.get("PATH", "")},
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()

    alice, bob = issue("alice"), issue("ci-bob")
    listed = subprocess.run([env.mcpwall, "token", "list"], env={"HOME": str(env.home)}, capture_output=True, text=True).stdout
    check(listed.split() == ["alice", "ci-bob"], "token list names the identities")
    stored = (env.home / ".mcpwall" / "tokens").read_text()
    check(alice[8:] not in stored and bob[8:] not in stored, "the tokens file holds no token in clear")
    check(oct((env.home / ".mcpwall" / "tokens").stat().st_mode & 0o777) == "0o600", "the tokens file is 0600")

    # CI identities may not read the server's environment: the tool is withheld from
    # their lists and refused if called anyway; other identities keep it.
    policy = env.policy.with_name("identities.yml")
    policy.write_text(env.policy.read_text().replace("settings:\n", "settings:\n  rate_limit: {max_calls: 3, window_seconds: 600}\n", 1).replace("rules:\n", """rules:
  - name: ci-no-env
    match: {tool: get-env, identity: "ci-*"}
    action: deny
""", 1))
    received = env.home / "server-received.jsonl"
    # The server's stdin is copied to a file: what the gateway refused must not be there.
    recording = ["sh", "-c", 'tee -a "$0" | exec "$1" stdio', str(received), EVERYTHING[0]]
    with gateway(env, recording, policy=policy) as url:
        r = post(url, init_body(), None)
        check(r.status_code == 401 and r.headers.get("www-authenticate") == "Bearer", "no token: 401")
        forged = "mcpwall_" + "0" * 64
        r = post(url, init_body(), forged)
        check(r.status_code == 401, "an unknown token: 401")
        check(not received.exists() or received.read_text() == "", "the server never saw the unauthenticated requests")

        session = open_raw_session(url, alice)
        r = post(url, call_body(2, "from-alice"), alice, session)
        check(r.status_code == 200 and "from-alice" in json.dumps(answer_of(r)), "alice's call on her session works")

        hijack = "hijack-" + "x" * 6
        r = post(url, call_body(3, hijack), bob, session)
        check(r.status_code == 404, f"bob's token on alice's session is refused ({r.status_code})")
        r = post(url, call_body(4, hijack), None, session)
        check(r.status_code == 401, "no token on alice's session: 401")
        r = httpx2.get(url, headers={"Accept": "text/event-stream", "Authorization": f"Bearer {bob}",
                                     "Mcp-Session-Id": session}, timeout=STEP_TIMEOUT)
        check(r.status_code == 404, "bob cannot open alice's GET stream")
        r = httpx2.delete(url, headers={"Authorization": f"Bearer {bob}", "Mcp-Session-Id": session}, timeout=STEP_TIMEOUT)
        check(r.status_code == 404, "bob cannot DELETE alice's session")
        r = post(url, call_body(5, "alice-again"), alice, session)
        check(r.status_code == 200 and "alice-again" in json.dumps(answer_of(r)), "alice's session survives the attempts")

        # settings.rate_limit (3 calls of a tool per window) counts per identity: a new
        # session does not start alice's count again; bob's count is his own.
        second = open_raw_session(url, alice)
        r = post(url, call_body(20, "third-echo"), alice, second)
        check("third-echo" in json.dumps(answer_of(r)), "alice's third echo, on a second session, is within the limit")
        r = post(url, call_body(21, "fourth-echo"), alice, second)
        check(answer_of(r).get("error", {}).get("code") == -32001,
              "alice's fourth echo is over the limit although it came on a new session")
        bobs = open_raw_session(url, bob)
        r = post(url, call_body(22, "bob-echo"), bob, bobs)
        check("bob-echo" in json.dumps(answer_of(r)) and "error" not in answer_of(r),
              "bob's calls count apart from alice's")

        async with connect(url, bob)() as (rs, ws):
            async with ClientSession(rs, ws) as s:
                with anyio.fail_after(STEP_TIMEOUT):
                    await s.initialize()
                    tools = {t.name for t in (await s.list_tools()).tools}
                    check("echo" in tools, "the SDK client with a token works (its own session)")
                    check("get-env" not in tools, "ci-bob's tool list lacks the tool a rule denies to ci-*")
                    try:
                        await s.call_tool("get-env", {})
                        raise AssertionError("ci-bob called get-env")
                    except MCPError as e:
                        check(e.code == -32001, "ci-bob's call of it is refused")

        async with connect(url, alice)() as (rs, ws):
            async with ClientSession(rs, ws) as s:
                with anyio.fail_after(STEP_TIMEOUT):
                    await s.initialize()
                    tools = {t.name for t in (await s.list_tools()).tools}
                    check("get-env" in tools, "alice's tool list keeps it")
                    shown = text_of(await s.call_tool("get-env", {}))
                    check("PATH" in shown, "alice may call it")

        r = post(url, init_body(), alice, Origin="http://evil.example")
        check(r.status_code == 403, "a foreign Origin: 403")
        r = post(url, init_body(), alice, Origin="http://localhost:5173")
        check(r.status_code == 200, "a loopback Origin is accepted")
        r = post(url, call_body(6, "v"), alice, session, **{"MCP-Protocol-Version": "1999-01-01"})
        check(r.status_code == 400, "an unsupported MCP-Protocol-Version: 400")
        r = post(url, call_body(7, "no-session"), alice)
        check(r.status_code == 400, "a request without Mcp-Session-Id (not initialize): 400")

        r = httpx2.delete(url, headers={"Authorization": f"Bearer {alice}", "Mcp-Session-Id": session}, timeout=STEP_TIMEOUT)
        check(r.status_code == 200, "DELETE ends alice's session")
        r = post(url, call_body(8, "after-delete"), alice, session)
        check(r.status_code == 404, "the ended session: 404")

        subprocess.run([env.mcpwall, "token", "remove", "alice"], env={"HOME": str(env.home)},
                       capture_output=True, check=True)
        r = post(url, init_body(), alice)
        check(r.status_code == 401, "a removed token is refused by the running gateway")
        r = post(url, init_body(), bob)
        check(r.status_code == 200, "the other identity's token still works")

    seen = received.read_text()
    check("from-alice" in seen and "alice-again" in seen, "the server saw alice's calls")
    check(hijack not in seen and "after-delete" not in seen and "no-session" not in seen
          and "fourth-echo" not in seen,
          "the server never saw the refused requests")
    events = audit_events(env)
    check(any(e["rule"] == "mcpwall:unauthenticated" and e["action"] == "deny" for e in events),
          "the unauthenticated requests are audited")
    check(any(e["rule"] == "mcpwall:session_identity" and e.get("identity") == "ci-bob" for e in events),
          "the hijack attempt is audited with bob's identity")
    check(any(e["rule"] == "ci-no-env" and e["action"] == "deny" and e.get("identity") == "ci-bob" for e in events),
          "ci-bob's refused call is audited under the identity rule's name")
    check(any(e["method"] == "tools/call" and e.get("identity") == "alice" and e.get("transport") == "http"
              for e in events), "alice's calls are audited with her identity")
    check(alice not in json.dumps(events) and bob not in json.dumps(events), "no token reaches the audit log")


def sse_messages(response: httpx2.Response) -> list[dict]:
    """Every JSON-RPC message of a POST's answer, whether JSON or an SSE stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [json.loads(l[6:]) for l in response.text.splitlines() if l.startswith("data: ")]
    return [response.json()]


async def modern_era(env: Env) -> None:
    print("the 2026-07-28 revision on the same listener: served per identity, headers checked against the body")

    def issue(name: str) -> str:
        out = subprocess.run([env.mcpwall, "token", "add", name], env={"HOME": str(env.home), "PATH": os.environ.get("PATH", "")},
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()

    dana, erin = issue("dana"), issue("ci-erin")
    policy = env.policy.with_name("modern.yml")
    policy.write_text(env.policy.read_text().replace("rules:\n", """rules:
  - name: ci-no-env
    match: {tool: get-env, identity: "ci-*"}
    action: deny
""", 1))
    # Each server process copies its stdin to its own file (named by its shell's pid).
    base = env.home / "modern-received"
    recording = ["sh", "-c", 'tee -a "$0.$$" | exec "$1" stdio', str(base), EVERYTHING[0]]
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    modern = {"MCP-Protocol-Version": "2026-07-28"}

    def request(token: str, n, method: str, params: dict | None = None, name: str | None = None,
                extra_meta: dict | None = None) -> httpx2.Response:
        body = {"jsonrpc": "2.0", "id": n, "method": method,
                "params": {**(params or {}), "_meta": {**meta, **(extra_meta or {})}}}
        headers = {**modern, "Mcp-Method": method}
        if name is not None:
            headers["Mcp-Name"] = name
        return post(url, body, token, **headers)

    def call(token: str, n, tool: str, arguments: dict, header_name: str | None = None, **kw) -> httpx2.Response:
        return request(token, n, "tools/call", {"name": tool, "arguments": arguments}, header_name or tool, **kw)

    def servers() -> list[str]:
        return [p.read_text() for p in sorted(env.home.glob("modern-received.*"))]

    # The server's environment holds a (fake) key, which get-env shows.
    with gateway(env, recording, extra_env={"MODERN_AWS_KEY": env.aws_key}, policy=policy) as url:
        r = call(dana, 11, "get-env", {}, "echo")
        check(r.status_code == 400 and r.json()["error"]["code"] == -32020 and r.json()["id"] == 11,
              "Mcp-Name saying echo over a body calling get-env: 400, -32020")
        r = post(url, {"jsonrpc": "2.0", "id": 12, "method": "tools/list", "params": {"_meta": meta}},
                 dana, **modern, **{"Mcp-Method": "tools/call"})
        check(r.status_code == 400 and r.json()["error"]["code"] == -32020, "Mcp-Method unlike the body's method: -32020")
        r = post(url, {"jsonrpc": "2.0", "id": 13, "method": "tools/list", "params": {"_meta": meta}}, dana, **modern)
        check(r.status_code == 400 and r.json()["error"]["code"] == -32020, "a missing Mcp-Method: -32020")
        r = post(url, {"jsonrpc": "2.0", "id": 14, "method": "tools/list", "params": {"_meta": meta}},
                 None, **modern, **{"Mcp-Method": "tools/list"})
        check(r.status_code == 401, "a modern request without a token: 401")
        check(servers() == [], "no server was started for refused requests")

        r = request(dana, "d", "server/discover")
        result = r.json()["result"]
        check(r.status_code == 200 and result["supportedVersions"][0] == "2026-07-28"
              and "2025-11-25" in result["supportedVersions"] and "tools" in result["capabilities"],
              "server/discover names the versions served and the server's capabilities")

        r = request(dana, 1, "tools/list")
        listed = answer_of(r)
        dana_tools = {t["name"] for t in listed["result"]["tools"]}
        check(listed["id"] == 1 and {"echo", "get-env"} <= dana_tools, "dana's tools/list, with her id")
        check(listed["result"]["resultType"] == "complete" and listed["result"]["cacheScope"] == "private",
              "the list is a complete result no shared cache may keep")
        r = request(erin, 1, "tools/list")
        erin_tools = {t["name"] for t in answer_of(r)["result"]["tools"]}
        check("echo" in erin_tools and "get-env" not in erin_tools, "ci-erin's list lacks the tool a rule denies to ci-*")

        r = call(dana, 2, "echo", {"message": "dana-modern"}, "=?base64?ZWNobw==?=")
        a = answer_of(r)
        check(r.status_code == 200 and a["id"] == 2 and "dana-modern" in json.dumps(a["result"]),
              "dana's echo (Base64 Mcp-Name) is served")
        r = call(dana, 3, "get-env", {})
        check("PATH" in json.dumps(answer_of(r).get("result")), "dana may call get-env")
        r = call(erin, 3, "get-env", {})
        check(answer_of(r).get("error", {}).get("code") == -32001, "ci-erin's get-env is refused")
        r = call(erin, 4, "echo", {"message": "erin echo"})
        check("erin echo" in json.dumps(answer_of(r)), "ci-erin's echo is served")
        r = call(dana, 4, "get-env", {})
        shown = json.dumps(answer_of(r))
        check(env.aws_key not in shown and "REDACTED" in shown, "a secret in the answer is redacted")

        r = call(dana, 5, "trigger-long-running-operation", {"duration": 1, "steps": 3},
                 extra_meta={"progressToken": "dana-progress"})
        messages = sse_messages(r)
        progress = [m for m in messages if m.get("method") == "notifications/progress"]
        check(len(progress) == 3 and all(m["params"]["progressToken"] == "dana-progress" for m in progress),
              "progress comes on the request's SSE response, with the client's token")
        check(messages[-1]["id"] == 5 and "result" in messages[-1], "then the answer ends the stream")

        r = call(dana, 6, "trigger-sampling-request", {"prompt": "say hi", "maxTokens": 5})
        check(answer_of(r)["id"] == 6, "a tool that asks for sampling gets an answer (the gateway refused the sampling)")

        # A client that can sample is asked, the 2026-07-28 way: input_required, then its retry.
        can_sample = {"io.modelcontextprotocol/clientCapabilities": {"sampling": {}}}
        r = call(dana, 8, "trigger-sampling-request", {"prompt": "say hi", "maxTokens": 5}, extra_meta=can_sample)
        first = answer_of(r)
        asked = first.get("result", {})
        check(first["id"] == 8 and asked.get("resultType") == "input_required"
              and asked["inputRequests"]["input-1"]["method"] == "sampling/createMessage",
              "the server's sampling request comes back as input_required")
        sample = {"role": "assistant", "model": "interop", "stopReason": "endTurn",
                  "content": {"type": "text", "text": "hi from the client"}}
        r = request(dana, 9, "tools/call", {"name": "trigger-sampling-request",
                                            "arguments": {"prompt": "say hi", "maxTokens": 5},
                                            "requestState": asked.get("requestState"),
                                            "inputResponses": {"input-1": sample}},
                    "trigger-sampling-request", extra_meta=can_sample)
        done = answer_of(r)
        check(done["id"] == 9 and done["result"]["resultType"] == "complete"
              and "hi from the client" in json.dumps(done["result"]),
              "the retry with the client's sample gets the tool's answer")
        r = request(erin, 10, "tools/call", {"name": "trigger-sampling-request",
                                             "arguments": {"prompt": "say hi", "maxTokens": 5},
                                             "requestState": asked.get("requestState"),
                                             "inputResponses": {"input-1": sample}},
                    "trigger-sampling-request", extra_meta=can_sample)
        check(r.status_code == 400 and r.json()["error"]["code"] == -32602,
              "another identity cannot use that requestState")

        r = request(dana, 7, "no/such-method")
        check(r.status_code == 404 and r.json()["error"]["code"] == -32601 and r.json()["id"] == 7,
              "a method the server does not have: 404, -32601")

        r = httpx2.get(url, headers={"Accept": "text/event-stream", "Authorization": f"Bearer {dana}", **modern},
                       timeout=STEP_TIMEOUT)
        check(r.status_code == 405, "GET with the modern version: 405")
        r = httpx2.delete(url, headers={"Authorization": f"Bearer {dana}", **modern}, timeout=STEP_TIMEOUT)
        check(r.status_code == 405, "DELETE with the modern version: 405")

        # The same listener then serves the session-based era, as a dual-era client falls back to.
        async with connect(url, dana)() as (rs, ws):
            async with ClientSession(rs, ws) as s:
                with anyio.fail_after(STEP_TIMEOUT):
                    await s.initialize()
                    check("m2" in text_of(await s.call_tool("echo", {"message": "m2"})),
                          "a 2025-11-25 session works on the same listener")
    seen = servers()
    modern_servers = [t for t in seen if "mcpwall (for stateless clients)" in t]
    check(len(modern_servers) == 2, f"one server per identity for the modern requests ({len(modern_servers)})")
    check(sum("dana-modern" in t for t in seen) == 1 and sum("erin echo" in t for t in seen) == 1
          and not any("dana-modern" in t and "erin echo" in t for t in seen),
          "dana's and ci-erin's requests went to different servers")
    leaked = [line for t in seen for line in t.splitlines()
              if "2026-07-28" in line or "io.modelcontextprotocol" in line]
    check(not leaked, f"the servers saw session-based requests only {leaked[:2]}")
    check(sum('"get-env"' in t for t in modern_servers) == 1, "ci-erin's refused get-env never reached a server")
    events = audit_events(env)
    check(any(e["rule"] == "ci-no-env" and e.get("identity") == "ci-erin" for e in events),
          "ci-erin's refused call is audited with her identity")


async def main(mcpwall: str) -> None:
    with tempfile.TemporaryDirectory(prefix="mcpwall-http-") as root:
        env = Env(mcpwall, Path(root))
        await transcript_over_http(env)
        await transcript_over_legacy_sse(env)
        await refusals_over_http(env)
        # identities() issues the first tokens in this HOME; modern_era() more.
        await identities(env)
        await modern_era(env)
    print("http_gateway: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: http_gateway.py MCPWALL_BINARY")
    anyio.run(main, sys.argv[1])
