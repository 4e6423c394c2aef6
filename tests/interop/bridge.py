"""Bridge mode (issue 25): the official MCP Python SDK client over stdio through
`mcpwall --upstream URL` to server-everything in its Streamable HTTP mode, compared with
the same client connected to that server directly over HTTP; the policy in the middle (a
denied call, a redacted answer) as on stdio; and the same client over Streamable HTTP
through `mcpwall serve --upstream URL` to the same server.

Usage: bridge.py MCPWALL_BINARY
Run from tests/bridge.rs. Every credential here is generated at run time; the network is
loopback only.
"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from interop import BIN, STEP_TIMEOUT, Env, check, everything_transcript, fake_aws_key_id, text_of


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def everything_over_http(env: Env, extra_env: dict | None = None):
    """server-everything's Streamable HTTP mode on a free loopback port; yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "mcp-server-everything"), "streamableHttp"],
        env={"HOME": str(env.home), "PATH": os.environ.get("PATH", ""), "PORT": str(port), **(extra_env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stderr:
        if re.search(r"listening on port", line, re.I):
            break
    else:
        proc.wait()
        raise AssertionError(f"server-everything (streamableHttp) did not start (exit {proc.returncode})")
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def direct(url: str):
    @asynccontextmanager
    async def open_transport():
        async with streamable_http_client(url) as streams:
            yield streams[0], streams[1]

    return open_transport


def bridged(env: Env, url: str, extra_env: dict | None = None):
    params = StdioServerParameters(
        command=env.mcpwall,
        args=["-c", str(env.policy), "--server-name", "everything", "--upstream", url],
        env={"HOME": str(env.home), "PATH": os.environ.get("PATH", ""), **(extra_env or {})},
        cwd=str(env.project),
    )
    return lambda: stdio_client(params)


def audit_events(env: Env) -> list[dict]:
    text = "".join(p.read_text() for p in sorted(env.logs.glob("*.jsonl")))
    return [json.loads(l) for l in text.splitlines()]


async def transcript(env: Env) -> None:
    print("server-everything over Streamable HTTP: the SDK directly vs the SDK over stdio through the bridge")
    with everything_over_http(env) as url:
        straight = await everything_transcript(env, True, direct(url))
        through = await everything_transcript(env, True, bridged(env, url))
    check(straight["progress-seen"] and straight["sampling-seen"],
          "the direct run exercised progress and sampling")
    for key in straight:
        if straight[key] != through[key]:
            print(f"  DIFF in {key}:\n    direct: {json.dumps(straight[key])[:600]}\n    bridge: {json.dumps(through[key])[:600]}")
        check(straight[key] == through[key], f"{key} is the same directly and through the bridge")
    events = [e for e in audit_events(env) if e.get("transport") == "upstream"]
    check(any(e["method"] == "tools/call" and e["action"] == "allow" for e in events),
          "the bridge's decisions are audited with transport: upstream")


async def refusals(env: Env) -> None:
    print("policy through the bridge: a denial and a redaction, as over stdio")
    aws = fake_aws_key_id()
    with everything_over_http(env, {"INTEROP_FAKE_KEY": aws}) as url:
        async with bridged(env, url)() as (r, w):
            async with ClientSession(r, w) as s:
                with anyio.fail_after(STEP_TIMEOUT):
                    await s.initialize()
                    try:
                        await s.call_tool("echo", {"message": str(env.home / ".ssh" / "id_rsa")})
                        raise AssertionError("an argument naming ~/.ssh was not denied through the bridge")
                    except MCPError as e:
                        check(e.code == -32001, f"a denied call is refused ({e.message})")
                    shown = text_of(await s.call_tool("get-env", {}))
                    check(aws not in shown and "[REDACTED BY MCPWALL]" in shown and "INTEROP_FAKE_KEY" in shown,
                          "a secret in an SSE answer is redacted before it reaches the client")
                    echoed = text_of(await s.call_tool("echo", {"message": "still here"}))
                    check("still here" in echoed, "the session goes on after a refusal")
    events = audit_events(env)
    check(aws not in json.dumps(events), "no secret reaches the audit log")
    check(any(e["action"] == "deny" and e.get("transport") == "upstream" for e in events),
          "the denial is audited")


@contextmanager
def serve_upstream(env: Env, url: str):
    """`mcpwall serve --upstream URL` on a free loopback port; yields its endpoint."""
    proc = subprocess.Popen(
        [env.mcpwall, "serve", "--listen", "127.0.0.1:0", "-c", str(env.policy),
         "--server-name", "everything", "--upstream", url],
        env={"HOME": str(env.home), "PATH": os.environ.get("PATH", "")},
        cwd=str(env.project),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    endpoint = None
    for line in proc.stderr:
        sys.stderr.write(f"  [serve] {line}")
        m = re.search(r"serving (http://\S+/mcp)", line)
        if m:
            endpoint = m.group(1)
            break
    if endpoint is None:
        proc.wait()
        raise AssertionError(f"mcpwall serve --upstream did not start (exit {proc.returncode})")
    threading.Thread(target=lambda: [sys.stderr.write(f"  [serve] {l}") for l in proc.stderr], daemon=True).start()
    try:
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("mcpwall serve did not exit within 15 s of SIGTERM")


async def gateway_to_upstream(env: Env) -> None:
    print("server-everything over Streamable HTTP: the SDK directly vs through mcpwall serve --upstream")
    with everything_over_http(env) as url:
        straight = await everything_transcript(env, True, direct(url))
        with serve_upstream(env, url) as endpoint:
            through = await everything_transcript(env, True, direct(endpoint))
            async with direct(endpoint)() as (r, w):
                async with ClientSession(r, w) as s:
                    with anyio.fail_after(STEP_TIMEOUT):
                        await s.initialize()
                        try:
                            await s.call_tool("echo", {"message": str(env.home / ".ssh" / "id_rsa")})
                            raise AssertionError("an argument naming ~/.ssh was not denied by serve --upstream")
                        except MCPError as e:
                            check(e.code == -32001, f"serve --upstream refuses a denied call ({e.message})")
    for key in straight:
        if straight[key] != through[key]:
            print(f"  DIFF in {key}:\n    direct: {json.dumps(straight[key])[:600]}\n    serve:  {json.dumps(through[key])[:600]}")
        check(straight[key] == through[key], f"{key} is the same directly and through serve --upstream")


async def main(mcpwall: str) -> None:
    with tempfile.TemporaryDirectory(prefix="mcpwall-bridge-") as root:
        env = Env(mcpwall, Path(root))
        await transcript(env)
        await refusals(env)
        await gateway_to_upstream(env)
    print("bridge: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bridge.py MCPWALL_BINARY")
    anyio.run(main, sys.argv[1])
