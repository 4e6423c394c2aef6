"""Interop over WebSocket (issue 25): the official MCP Python SDK's ClientSession through
`mcpwall serve`'s `/ws` endpoint to server-everything (stdio), compared with the direct
stdio connection; a denied call never reaches the server; a secret in a response is
redacted; a bearer token is required once tokens exist.

The SDK (2.x) no longer ships a WebSocket client, so `websocket_transport` below is the
small adapter it used to be: the `websockets` package with subprotocol `mcp`, one text
message per JSON-RPC message, feeding the SDK's own ClientSession.

Usage: websocket_gateway.py MCPWALL_BINARY
Run from tests/http_gateway.rs. Every token and credential here is generated at run time;
the network is loopback only.
"""

import json
import os
import shlex
import subprocess
import sys
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import websockets
from websockets.asyncio.client import connect as ws_connect
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from http_gateway import EVERYTHING, audit_events, gateway
from interop import BIN, STEP_TIMEOUT, Env, check, everything_transcript, fake_aws_key_id, text_of


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://").removesuffix("/mcp") + "/ws"


def websocket_transport(url: str, token: str | None = None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    @asynccontextmanager
    async def open_transport():
        to_client_w, to_client_r = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_server_w, to_server_r = anyio.create_memory_object_stream[SessionMessage](0)
        async with ws_connect(url, subprotocols=["mcp"], additional_headers=headers) as socket:
            check(socket.subprotocol == "mcp", "the gateway confirms the mcp subprotocol")

            async def reader():
                async with to_client_w:
                    try:
                        async for text in socket:
                            try:
                                message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
                                await to_client_w.send(SessionMessage(message))
                            except Exception as e:  # a message the SDK cannot read goes to it as an error
                                await to_client_w.send(e)
                    except websockets.ConnectionClosed:
                        pass

            async def writer():
                async with to_server_r:
                    async for m in to_server_r:
                        await socket.send(m.message.model_dump_json(by_alias=True, exclude_unset=True))

            async with anyio.create_task_group() as tg:
                tg.start_soon(reader)
                tg.start_soon(writer)
                try:
                    yield to_client_r, to_server_w
                finally:
                    tg.cancel_scope.cancel()

    return open_transport


async def transcript_over_websocket(env: Env) -> None:
    print("server-everything: direct (stdio) vs the SDK's ClientSession over WebSocket through mcpwall serve")
    direct = await everything_transcript(env, False)
    with gateway(env, EVERYTHING) as url:
        over_ws = await everything_transcript(env, True, websocket_transport(ws_url(url)))
    for key in direct:
        if direct[key] != over_ws[key]:
            print(f"  DIFF in {key}:\n    direct: {json.dumps(direct[key])[:600]}\n    ws:     {json.dumps(over_ws[key])[:600]}")
        check(direct[key] == over_ws[key], f"{key} is the same directly and over WebSocket through mcpwall")
    events = [e for e in audit_events(env) if e.get("transport") == "websocket"]
    check(any(e.get("method") == "tools/call" and e["action"] == "allow" for e in events),
          "the gateway's decisions are audited with transport: websocket")


async def refusals_over_websocket(env: Env) -> None:
    print("policy over WebSocket: denials and redactions, what the server received")
    aws = fake_aws_key_id()
    received = env.home / "ws-received.jsonl"
    # What the server reads, copied to a file on its way in.
    server = ["sh", "-c", f"tee -a {shlex.quote(str(received))} | {shlex.quote(str(BIN / 'mcp-server-everything'))} stdio"]
    with gateway(env, server, {"INTEROP_FAKE_KEY": aws}) as url:
        async with websocket_transport(ws_url(url))() as (r, w):
            async with ClientSession(r, w) as s:
                with anyio.fail_after(STEP_TIMEOUT):
                    await s.initialize()
                    tools = [t.name for t in (await s.list_tools()).tools]
                    check("echo" in tools and "get-env" in tools, "tools/list over WebSocket")
                    check("ws-hello" in text_of(await s.call_tool("echo", {"message": "ws-hello"})),
                          "an allowed call is answered over WebSocket")
                    try:
                        await s.call_tool("echo", {"message": str(env.home / ".ssh" / "id_rsa")})
                        raise AssertionError("an argument naming ~/.ssh was not denied over WebSocket")
                    except MCPError as e:
                        check(e.code == -32001, f"a denied call is refused over WebSocket ({e.message})")
                    shown = text_of(await s.call_tool("get-env", {}))
                    check(aws not in shown and "[REDACTED BY MCPWALL]" in shown and "INTEROP_FAKE_KEY" in shown,
                          "a secret in a response is redacted before it reaches the WebSocket client")
    seen = received.read_text()
    check("ws-hello" in seen and ".ssh" not in seen, "the server received the allowed call and never the denied one")
    check(aws not in json.dumps(audit_events(env)), "no secret reaches the audit log")


async def tokens_over_websocket(env: Env) -> None:
    print("identities over WebSocket: the upgrade needs a bearer token")
    out = subprocess.run([env.mcpwall, "token", "add", "ws-alice"], env={"HOME": str(env.home), "PATH": os.environ.get("PATH", "")},
                         capture_output=True, text=True, check=True)
    alice = out.stdout.strip()
    with gateway(env, EVERYTHING) as url:
        try:
            async with ws_connect(ws_url(url), subprotocols=["mcp"]):
                raise AssertionError("an upgrade without a token was accepted")
        except websockets.InvalidStatus as e:
            check(e.response.status_code == 401, "no token: 401, no socket")
        async with websocket_transport(ws_url(url), alice)() as (r, w):
            async with ClientSession(r, w) as s:
                with anyio.fail_after(STEP_TIMEOUT):
                    await s.initialize()
                    check("tok" in text_of(await s.call_tool("echo", {"message": "tok"})),
                          "with its token, an identity's socket works")
    check(any(e.get("identity") == "ws-alice" and e.get("transport") == "websocket" for e in audit_events(env)),
          "the audit log records the socket's identity")


async def main(mcpwall: str) -> None:
    with tempfile.TemporaryDirectory(prefix="mcpwall-ws-") as root:
        env = Env(mcpwall, Path(root))
        await transcript_over_websocket(env)
        await refusals_over_websocket(env)
        # Last: tokens make every later gateway in this HOME require one.
        await tokens_over_websocket(env)
    print("websocket_gateway: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: websocket_gateway.py MCPWALL_BINARY")
    anyio.run(main, sys.argv[1])
