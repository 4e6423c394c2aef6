"""Session core: what mcpwall does when the server breaks the JSON-RPC session rules.

Usage: session_core.py MCPWALL_BINARY [--direct]

The client is the official MCP Python SDK; the server is misbehaving_server.py, which puts
on the wire what no SDK would: answers with a re-typed id, duplicate keys, lines that are
not JSON-RPC, a frame over max_frame_bytes, and a sampling request whose answer carries
a credential. Each scenario gets a fresh mcpwall session, HOME, working directory and
audit log, runs on its own and reports PASS or FAIL. Within a scenario a failed check does
not stop the checks after it (only a failed precondition does: no handshake, no answer to
read), so one run shows every way a build falls short. A summary follows, and the exit
code is non-zero if any scenario failed.

Why the SDK client matters: it correlates a response id "7" with its request 7 and reads
the last of two duplicate keys, so a frame that mcpwall does not recognise as the answer
to a call (and so does not judge as one) is still taken as that answer by a real client.

--direct runs the same scenarios with no mcpwall in between. Every scenario should then
FAIL: that shows each misbehaviour really reaches (or hangs) an unprotected client, so a
PASS through mcpwall is mcpwall's doing. Audit-log checks are skipped there.

Every credential here is a fake generated at run time.
"""

import inspect
import json
import logging
import os
import queue
import random
import string
import subprocess
import sys
import tempfile
import threading
import traceback
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

import misbehaving_server as bad

# The SDK logs a traceback for each line it cannot parse; the Tap already counts those,
# and the tracebacks would bury the report.
logging.getLogger("mcp.client.stdio").setLevel(logging.CRITICAL)

HERE = Path(__file__).resolve().parent
SERVER = HERE / "misbehaving_server.py"
# Short on purpose: a hang is one of the failures under test, and it should show as
# one quickly, not as the harness's 300 s timeout.
STEP_TIMEOUT = 10
# Long enough for the server's late second answer (0.3 s) to have come through.
SETTLE = 0.8
# Audit actions that show mcpwall refused a frame or answered in the server's place
# (src/verdict.rs, Verdict); allow, pass, redact and log_only all let a frame through.
REFUSALS = {"deny", "block", "drop", "error"}
# ...except this one: it is written at shutdown for any request still pending, which is
# what a frame that slipped past unmatched leaves behind, so it proves nothing.
NOT_A_REFUSAL = "mcpwall:server_exited"

POLICY = """version: 1
extends: [default]
settings:
  log_dir: "{log_dir}"
{extra}"""


def fake_aws_key_id() -> str:
    alphabet = string.ascii_uppercase + "234567"
    return "AKIA" + "".join(random.choice(alphabet) for _ in range(16))


# The failed checks of the scenario that is running.
FAILED: list[str] = []


class Abort(Exception):
    """A precondition failed: the rest of the scenario would check nothing."""


def check(cond: bool, what: str) -> bool:
    print(f"  {'ok' if cond else 'FAIL'}: {what}")
    if not cond:
        FAILED.append(what)
    return cond


def require(cond: bool, what: str) -> None:
    if not check(cond, what):
        raise Abort(what)


def excerpt(text: str, marker: str, around: int = 60) -> str:
    at = text.index(marker)
    return "..." + text[max(0, at - around):at + min(len(marker), 48) + around] + "..."


def text_of(result) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", None) == "text")


# What `within` gives back for a step that hung, so that the checks after it still run.
HUNG = object()


async def within(awaitable, what: str, needed: bool = False):
    """Await with the step timeout. A hang is a failed check; the result is then HUNG, or,
    if the scenario cannot go on without it (`needed`), the scenario ends."""
    try:
        with anyio.fail_after(STEP_TIMEOUT):
            return await awaitable
    except TimeoutError:
        hang = f"{what}: nothing arrived within {STEP_TIMEOUT} s (hang)"
        if needed:
            require(False, hang)
        check(False, hang)
        return HUNG


class Run:
    """One scenario's world: temporary HOME, project (the working directory), audit log
    directory and policy, and whether mcpwall sits in between."""

    def __init__(self, mcpwall: str, direct: bool, root: Path, extra_settings: str = ""):
        self.mcpwall = mcpwall
        self.direct = direct
        self.home = root / "home"
        self.project = root / "project"
        self.logs = root / "logs"
        self.home.mkdir()
        self.project.mkdir()
        self.policy = root / "policy.yml"
        self.policy.write_text(POLICY.format(log_dir=self.logs, extra=extra_settings))
        self.record = root / "server-received.jsonl"

    def command(self, mode: str) -> list[str]:
        server = [sys.executable, str(SERVER), mode, str(self.record)]
        if self.direct:
            return server
        return [self.mcpwall, "-c", str(self.policy), "--server-name", "bad", "--", *server]

    def env(self) -> dict:
        return {"HOME": str(self.home), "PATH": os.environ.get("PATH", "")}

    @asynccontextmanager
    async def session(self, mode: str, **callbacks):
        cmd = self.command(mode)
        params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=self.env(), cwd=str(self.project))
        async with stdio_client(params) as (read, write):
            async with Tap(read) as tap:
                async with ClientSession(tap.stream, write, **callbacks) as s:
                    yield s, tap

    def audit_events(self) -> list[dict]:
        lines = "".join(p.read_text() for p in sorted(self.logs.glob("*.jsonl"))).splitlines()
        return [json.loads(l) for l in lines if l.strip()]

    def audit_text(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.logs.rglob("*")) if p.is_file())

    def check_refusal_audited(self) -> None:
        if self.direct:
            print("  (direct run: audit checks skipped)")
            return
        events = self.audit_events()
        refused = [e for e in events if e.get("action") in REFUSALS and e.get("rule") != NOT_A_REFUSAL]
        seen = sorted({(e.get("action"), e.get("rule")) for e in events}, key=str)
        check(bool(refused), f"the refusal is audited (events seen: {seen})")


class Tap:
    """Sits between stdio_client and ClientSession and keeps everything the client was
    handed. The SDK silently drops a response for an id it no longer waits for, so only
    here can a second answer to one request be seen."""

    def __init__(self, read):
        self._read = read
        self.items: list = []

    async def __aenter__(self):
        send, self.stream = anyio.create_memory_object_stream(100)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()

        async def pump():
            async with send:
                async for item in self._read:
                    self.items.append(item)
                    await send.send(item)

        self._tg.start_soon(pump)
        return self

    async def __aexit__(self, *exc):
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(*exc)

    def texts(self) -> list[str]:
        out = []
        for item in self.items:
            if isinstance(item, Exception):
                out.append(f"{item!r} {item}")
            else:
                out.append(item.message.model_dump_json(by_alias=True))
        return out

    def check_clean(self, *markers: str) -> None:
        """What every scenario asserts about the client's side of the wire."""
        bad_lines = [i for i in self.items if isinstance(i, Exception)]
        check(not bad_lines, f"every line the client got is a JSON-RPC message (unparseable: {len(bad_lines)})")
        answers: dict = {}
        for item in self.items:
            m = getattr(item, "message", None)
            if isinstance(m, (types.JSONRPCResponse, types.JSONRPCError)) and m.id is not None:
                # The SDK correlates "7" with 7; so must this count.
                key = int(m.id) if isinstance(m.id, str) and m.id.lstrip("-").isdigit() else m.id
                answers[key] = answers.get(key, 0) + 1
        twice = {k: n for k, n in answers.items() if n > 1}
        check(not twice, f"no request is answered twice (answers per id: {answers})")
        for marker in markers:
            leaked = [excerpt(t, marker) for t in self.texts() if marker in t]
            check(not leaked, f"{marker[:48]!r} never reaches the client (seen in: {leaked})")


async def expect_error(awaitable, what: str) -> None:
    try:
        result = await within(awaitable, what)
    except MCPError as e:
        # The SDK's own "Connection closed" is a dead session, not an answer.
        if e.code == types.CONNECTION_CLOSED:
            require(False, f"{what}: the session stays up (got {e.message!r})")
        check(True, f"{what} gets a JSON-RPC error ({e.code}: {e.message[:100]})")
        return
    if result is HUNG:
        return
    if hasattr(result, "tools"):
        summary = " | ".join(f"{t.name}: {t.description}" for t in result.tools)
    else:
        summary = text_of(result)
    check(False, f"{what} gets a JSON-RPC error, not the server's content "
                 f"(got {len(summary)} chars: {summary[:100]!r})")


async def start(s: ClientSession, list_tools: bool = True) -> None:
    init = await within(s.initialize(), "initialize", needed=True)
    require(init.server_info.name == "misbehaving-server", "handshake completes")
    if list_tools:
        # Also fills the SDK's output-schema cache, which call_tool would otherwise fill
        # by a tools/list of its own.
        tools = await within(s.list_tools(), "tools/list", needed=True)
        require({t.name for t in tools.tools} == {"echo", "misbehave"}, "tools/list")


async def still_works(s: ClientSession) -> None:
    echoed = await within(s.call_tool("echo", {"message": "still here"}), "the follow-up echo call")
    if echoed is not HUNG:
        check(text_of(echoed) == "still here", "the session keeps working (a following echo call succeeds)")


# Scenarios. Each takes a fresh Run; failed checks land in FAILED.


async def id_as_string(run: Run) -> None:
    async with run.session("id_as_string") as (s, tap):
        await start(s)
        await expect_error(s.call_tool("misbehave", {}), "a call answered with id \"N\" for N")
        await anyio.sleep(SETTLE)
        await still_works(s)
    tap.check_clean(bad.WRONG_ID_TEXT)
    run.check_refusal_audited()


async def id_as_float(run: Run) -> None:
    async with run.session("id_as_float") as (s, tap):
        await start(s)
        await expect_error(s.call_tool("misbehave", {}), "a call answered with id N.0")
        await still_works(s)
    tap.check_clean(bad.FLOAT_ID_TEXT)
    run.check_refusal_audited()


async def duplicate_result(run: Run) -> None:
    async with run.session("duplicate_result") as (s, tap):
        await start(s)
        await expect_error(s.call_tool("misbehave", {}), "a call answered with two `result` keys")
        await still_works(s)
    tap.check_clean(bad.INJECTED_TEXT, bad.DUP_FIRST_TEXT)
    run.check_refusal_audited()


async def poisoned_list(run: Run) -> None:
    async with run.session("poisoned_list") as (s, tap):
        await start(s, list_tools=False)
        await expect_error(s.list_tools(), "a tools/list answered with id \"N\" and a poisoned tool")
        # Every tools/list of this server is poisoned, and call_tool would list tools to
        # validate its result, so the follow-up is a ping.
        if await within(s.send_ping(), "the follow-up ping") is not HUNG:
            check(True, "the session keeps working (a following ping succeeds)")
    tap.check_clean("<IMPORTANT>", "id_rsa", "MBX-5eed")
    run.check_refusal_audited()


async def not_jsonrpc_sdk(run: Run) -> None:
    async with run.session("not_jsonrpc") as (s, tap):
        await start(s)
        result = await within(s.call_tool("misbehave", {}), "a call preceded by non-JSON-RPC lines")
        if result is not HUNG:
            check(text_of(result) == bad.PROPER_TEXT, "the proper answer still arrives")
        await still_works(s)
    tap.check_clean(*bad.NOT_JSONRPC_LINES)
    run.check_refusal_audited()


def not_jsonrpc_raw(run: Run) -> None:
    """The SDK quietly skips lines it cannot parse, so this client reads mcpwall's stdout
    itself: every line must be a JSON-RPC message."""
    proc = subprocess.Popen(
        run.command("not_jsonrpc"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env=run.env(), cwd=run.project,
    )
    lines: queue.Queue = queue.Queue()

    def reader():
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=reader, daemon=True).start()
    got: list[bytes] = []

    def send(msg: dict) -> None:
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
        proc.stdin.flush()

    def until_answer(rid: int, what: str) -> dict:
        while True:
            try:
                line = lines.get(timeout=STEP_TIMEOUT)
            except queue.Empty:
                raise Abort(f"{what}: nothing arrived within {STEP_TIMEOUT} s (hang)") from None
            if line is None:
                raise Abort(f"{what}: mcpwall's stdout closed first")
            got.append(line)
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # judged below with every other line
            if isinstance(msg, dict) and msg.get("id") == rid and "method" not in msg:
                return msg

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-client", "version": "0"}}})
        require("result" in until_answer(1, "initialize"), "raw handshake completes")
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "misbehave", "arguments": {}}})
        answer = until_answer(2, "the call")
        texts = [c.get("text") for c in answer.get("result", {}).get("content", [])]
        check(texts == [bad.PROPER_TEXT], "the proper answer still arrives")
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # Whatever came out after the answer counts too.
    try:
        while (line := lines.get(timeout=STEP_TIMEOUT)) is not None:
            got.append(line)
    except queue.Empty:
        check(False, f"mcpwall's stdout closes within {STEP_TIMEOUT} s of its stdin")

    def is_jsonrpc(line: bytes) -> bool:
        try:
            msg = json.loads(line)
        except ValueError:
            return False
        return isinstance(msg, dict) and msg.get("jsonrpc") == "2.0"

    not_rpc = [l.decode(errors="replace").rstrip() for l in got if not is_jsonrpc(l)]
    check(not not_rpc, f"every line on mcpwall's stdout is a JSON-RPC 2.0 message (not: {not_rpc})")
    wire = b"".join(got).decode(errors="replace")
    check("hello" not in wire and "garbage here" not in wire, "`hello` and `garbage here` never reach the client")
    run.check_refusal_audited()


async def sampling(run: Run) -> None:
    key = fake_aws_key_id()
    asked = []

    async def answer_with_key(ctx, params: types.CreateMessageRequestParams):
        asked.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"sure, use aws_access_key_id = {key}"),
            model="fake-model",
        )

    async with run.session("sampling", sampling_callback=answer_with_key) as (s, tap):
        await start(s)
        result = await within(s.call_tool("misbehave", {}), "a call during which the server samples")
        if result is not HUNG:
            check(text_of(result) == "sampling round trip done", "the call completes")
        # Without this the scenario could pass with nothing having reached the client.
        check(len(asked) == 1, "the server's sampling request reached the client's callback")
        await still_works(s)
    tap.check_clean()
    require(run.record.exists(), "the server got an answer to its sampling request")
    received = run.record.read_bytes()
    check(key.encode() not in received, "the fake AWS key id never reaches the server")
    answer = json.loads(received)
    check(answer.get("id") == bad.SAMPLING_ID and "error" in answer and "result" not in answer,
          f"the server gets a JSON-RPC error for {bad.SAMPLING_ID!r} instead "
          f"(got {received.decode(errors='replace')[:160].rstrip()})")
    if not run.direct:
        check(key not in run.audit_text(), "the key is not in the audit log")
    run.check_refusal_audited()


async def oversize(run: Run) -> None:
    async with run.session("oversize") as (s, tap):
        await start(s)
        await expect_error(s.call_tool("misbehave", {}), "a call answered with 64 KiB over an 8 KiB max_frame_bytes")
        await still_works(s)
    tap.check_clean("x" * 1024)
    run.check_refusal_audited()


SCENARIOS = [
    ("1 id_as_string", id_as_string, ""),
    ("2 id_as_float", id_as_float, ""),
    ("3 duplicate_result", duplicate_result, ""),
    ("4 poisoned_list", poisoned_list, ""),
    ("5 not_jsonrpc (SDK client)", not_jsonrpc_sdk, ""),
    ("5 not_jsonrpc (raw client)", not_jsonrpc_raw, ""),
    ("6 sampling", sampling, ""),
    ("7 oversize", oversize, "  max_frame_bytes: 8192\n"),
]


def first_leaf(exc: BaseException) -> BaseException:
    """anyio's task groups wrap what a scenario raises; report the cause, not the group."""
    while isinstance(exc, BaseExceptionGroup):
        exc = next((e for e in exc.exceptions if isinstance(e, Abort)), exc.exceptions[0])
    return exc


async def run_one(mcpwall: str, direct: bool, title: str, scenario, extra: str) -> list[str]:
    """Runs one scenario in its own temporary world; returns its failed checks."""
    print(f"== {title}")
    FAILED.clear()
    with tempfile.TemporaryDirectory(prefix="mcpwall-session-core-") as root:
        run = Run(mcpwall, direct, Path(root), extra)
        try:
            # A backstop over the per-step timeouts, for a shutdown that hangs.
            with anyio.fail_after(6 * STEP_TIMEOUT):
                if inspect.iscoroutinefunction(scenario):
                    await scenario(run)
                else:
                    # The raw client blocks on pipes; keep it off the event loop.
                    await anyio.to_thread.run_sync(scenario, run)
        except BaseException as e:  # every failure is reported; none stops the other scenarios
            leaf = first_leaf(e)
            if isinstance(leaf, (KeyboardInterrupt, SystemExit)):
                raise
            if isinstance(leaf, Abort):
                reason = str(leaf)
            elif isinstance(leaf, TimeoutError):
                reason = f"the scenario did not finish within {6 * STEP_TIMEOUT} s"
            else:
                reason = f"unexpected {type(leaf).__name__}: {leaf}"
                traceback.print_exception(leaf)
            if reason not in FAILED:
                print(f"  FAIL: {reason}")
                FAILED.append(reason)
    print("  PASS" if not FAILED else f"  => FAIL ({len(FAILED)} failed)")
    return list(FAILED)


async def main(mcpwall: str, direct: bool) -> int:
    print(f"session core: {'DIRECT (no mcpwall)' if direct else mcpwall}")
    results = [(title, await run_one(mcpwall, direct, title, f, extra)) for title, f, extra in SCENARIOS]
    print("\n== summary")
    for title, failed in results:
        print(f"  {'FAIL' if failed else 'PASS'}  {title}")
        for what in failed:
            print(f"          - {what}")
    bad_ones = sum(bool(f) for _, f in results)
    print(f"session core: {len(results) - bad_ones} passed, {bad_ones} failed")
    return 1 if bad_ones else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    direct = "--direct" in args
    args = [a for a in args if a != "--direct"]
    if len(args) != 1:
        sys.exit("usage: session_core.py MCPWALL_BINARY [--direct]")
    sys.exit(anyio.run(main, args[0], direct))
