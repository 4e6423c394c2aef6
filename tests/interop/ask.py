"""`action: ask` (issue 26), end to end: the official MCP Python SDK client, through
mcpwall, to a scripted server (trust_server.py's `shell` mode, which records every call
it receives).

Usage: ask.py MCPWALL_BINARY

  1 elicit_accept    the client declared elicitation; mcpwall asks through it, the user
                     accepts: the call reaches the server only then, once, unchanged
  2 elicit_decline   the user declines: the call is refused and never reaches the server
  3 elicit_timeout   the user never answers: refused after ask_timeout_seconds
  4 remember         `remember: session`: an identical call (keys in another order) runs
                     without asking again; one differing by a byte is asked about again
  5 cli_approve      a client without elicitation: the call waits in ~/.mcpwall/pending,
                     `mcpwall approve` (run here, with the test's HOME) lists it and
                     approves it by its code; then a second call is refused with --deny
  6 disconnect       the client goes away while a call waits: mcpwall exits, the call
                     never reaches the server, and it leaves the pending queue

Every scenario checks that nothing the client is sent names `mcpwall approve`, and that
the audit log records the ask and its outcome.
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import types
from mcp.shared.exceptions import MCPError

import session_core as core
import trust
from session_core import HUNG, Abort, check, require, text_of, within

core.STEP_TIMEOUT = 20
PUSH = "git push --force origin main"


def policy(run: trust.Run, timeout: int, remember: bool = False) -> None:
    config = run.home / ".mcpwall" / "config.yml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        "version: 1\n"
        "settings:\n"
        f"  ask_timeout_seconds: {timeout}\n"
        "rules:\n"
        "  - name: ask-before-push\n"
        "    match:\n"
        "      tool: run_command\n"
        "      arguments:\n"
        "        command: {regex: 'git push'}\n"
        "    action: ask\n"
        + ("    remember: session\n" if remember else "")
    )


class Elicit:
    """An elicitation callback that answers as told and keeps what it was asked, and
    what the server had received at that moment."""

    def __init__(self, run: trust.Run, answer: str, delay: float = 0.0):
        self.run, self.answer, self.delay = run, answer, delay
        self.asked: list[str] = []
        self.received_when_asked: list[int] = []

    async def __call__(self, ctx, params):
        self.asked.append(params.message)
        self.received_when_asked.append(len(self.run.calls_received()))
        if self.delay:
            await anyio.sleep(self.delay)
        if self.answer == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        if self.answer == "accept-unchecked":
            return types.ElicitResult(action="accept", content={"approve": False})
        return types.ElicitResult(action=self.answer)


@core.asynccontextmanager
async def session(run: trust.Run, elicit=None):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    cmd = run.command([sys.executable, str(trust.SCRIPTED), "shell", str(run.record)], "shell")
    env = {"HOME": str(run.home), "PATH": os.environ.get("PATH", "")}
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env, cwd=str(run.project))
    async with stdio_client(params) as (read, write):
        async with core.Tap(read) as tap:
            kwargs = {"elicitation_callback": elicit} if elicit else {}
            async with ClientSession(tap.stream, write, **kwargs) as s:
                yield s, tap


def no_approve_verb(tap, elicit=None) -> None:
    texts = tap.texts() + (elicit.asked if elicit else [])
    said = [t for t in texts if "mcpwall approve" in t]
    check(not said, f"nothing the client is sent names `mcpwall approve` (seen: {said[:2]})")


def pushes_received(run: trust.Run) -> list[str]:
    return [c.get("params", c).get("arguments", {}).get("command", "") if isinstance(c, dict) else ""
            for c in run.calls_received()]


async def refused(awaitable, what: str) -> str:
    try:
        result = await within(awaitable, what)
    except MCPError as e:
        check(True, f"{what} is refused ({e.code}: {e.message[:100]})")
        return e.message
    if result is HUNG:
        return ""
    if result.is_error:
        check(True, f"{what} is refused (isError)")
        return text_of(result)
    check(False, f"{what} is refused, not answered (got {text_of(result)[:100]!r})")
    return ""


def audited(run: trust.Run, action: str, how: str) -> None:
    events = run.audit_events()
    seen = [(e.get("action"), e.get("how")) for e in events if e.get("how")]
    check(any(e.get("action") == action and e.get("how") == how for e in events),
          f"the audit log records {action} ({how}) (seen: {seen})")


async def elicit_accept(run: trust.Run) -> None:
    policy(run, 30)
    elicit = Elicit(run, "accept")
    async with session(run, elicit) as (s, tap):
        await trust.start(s)
        result = await within(s.call_tool("run_command", {"command": PUSH}), "the push", needed=True)
        check(not result.is_error and PUSH in text_of(result), f"the approved call runs (got {text_of(result)[:80]!r})")
        other = await within(s.call_tool("run_command", {"command": "git status"}), "git status", needed=True)
        check(not other.is_error, "a call no ask rule matches runs without a question")
    check(len(elicit.asked) == 1, f"the user was asked once (asked {len(elicit.asked)} times)")
    if elicit.asked:
        m = elicit.asked[0]
        check("run_command" in m and "git push --force" in m and "ask-before-push" in m,
              f"the question names the tool, the arguments and the rule: {m!r}")
    check(elicit.received_when_asked == [0], f"nothing reached the server before the answer ({elicit.received_when_asked})")
    got = pushes_received(run)
    check(got.count(PUSH) == 1, f"the server received the push exactly once, unchanged ({got})")
    no_approve_verb(tap, elicit)
    tap.check_clean()
    audited(run, "ask", "elicitation")
    audited(run, "approved", "elicitation")


async def elicit_decline(run: trust.Run) -> None:
    policy(run, 30)
    for answer in ["decline", "cancel", "accept-unchecked"]:
        elicit = Elicit(run, answer)
        async with session(run, elicit) as (s, tap):
            await trust.start(s)
            text = await refused(s.call_tool("run_command", {"command": PUSH}), f"the push ({answer})")
            check("declined" in text, f"the refusal says the user declined ({text!r})")
        no_approve_verb(tap, elicit)
    check(PUSH not in pushes_received(run), f"the push never reached the server ({pushes_received(run)})")
    audited(run, "declined", "elicitation")


async def elicit_timeout(run: trust.Run) -> None:
    policy(run, 2)
    elicit = Elicit(run, "accept", delay=5)
    started = time.monotonic()
    async with session(run, elicit) as (s, tap):
        await trust.start(s)
        text = await refused(s.call_tool("run_command", {"command": PUSH}), "the unanswered push")
        check("no approval within 2 s" in text, f"the refusal says it timed out ({text!r})")
        # The late acceptance must not release it.
        await anyio.sleep(4)
    check(time.monotonic() - started < 15, "it did not wait much longer than the timeout")
    check(PUSH not in pushes_received(run), f"the push never reached the server ({pushes_received(run)})")
    no_approve_verb(tap, elicit)
    audited(run, "timed_out", "timeout")


async def remember(run: trust.Run) -> None:
    policy(run, 30, remember=True)
    elicit = Elicit(run, "accept")
    async with session(run, elicit) as (s, tap):
        await trust.start(s)
        args = {"command": PUSH, "cwd": "/p"}
        same = {"cwd": "/p", "command": PUSH}  # the same arguments, keys in another order
        other = {"command": PUSH + "x", "cwd": "/p"}
        for what, a in [("first", args), ("identical", same), ("one byte different", other)]:
            r = await within(s.call_tool("run_command", a), f"the {what} push", needed=True)
            check(not r.is_error, f"the {what} push runs")
    check(len(elicit.asked) == 2, f"asked for the first and the different call only (asked {len(elicit.asked)})")
    audited(run, "approved", "remembered")
    no_approve_verb(tap, elicit)


def approve_cli(run: trust.Run, *args: str) -> subprocess.CompletedProcess:
    env = {"HOME": str(run.home), "PATH": os.environ.get("PATH", "")}
    # Deciding without a terminal takes --yes (a script the user runs); listing does not.
    decide = ["--yes"] if args else []
    return subprocess.run([run.mcpwall, "approve", *decide, *args], env=env, capture_output=True, text=True, timeout=20)


def wait_for_code(run: trust.Run) -> str:
    pending = run.home / ".mcpwall" / "pending"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        codes = [p.stem for p in pending.glob("*.json")] if pending.exists() else []
        if codes:
            return codes[0]
        time.sleep(0.05)
    raise Abort("no call appeared in ~/.mcpwall/pending")


async def cli_approve(run: trust.Run) -> None:
    policy(run, 30)
    async with session(run) as (s, tap):
        await trust.start(s)
        results = {}

        async def call(key, command):
            try:
                results[key] = await s.call_tool("run_command", {"command": command})
            except MCPError as e:
                results[key] = e

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "approved", PUSH)
            code = await anyio.to_thread.run_sync(wait_for_code, run)
            pending = run.home / ".mcpwall" / "pending"
            mode = lambda p: p.stat().st_mode & 0o777
            check(mode(pending) == 0o700 and mode(pending / f"{code}.json") == 0o600,
                  f"the queue is private (dir {oct(mode(pending))})")
            check(PUSH not in pushes_received(run), "nothing reached the server before the approval")
            listing = await anyio.to_thread.run_sync(approve_cli, run)
            check(listing.returncode == 0 and code in listing.stdout and "git push --force" in listing.stdout
                  and "ask-before-push" in listing.stdout,
                  f"`mcpwall approve` lists the call with its arguments and rule: {listing.stdout!r}")
            done = await anyio.to_thread.run_sync(approve_cli, run, code)
            check(done.returncode == 0, f"`mcpwall approve CODE` succeeds ({done.stderr!r})")
        r = results.get("approved")
        check(isinstance(r, types.CallToolResult) and not r.is_error and PUSH in text_of(r),
              f"the approved call runs (got {r!r})"[:200])
        check(pushes_received(run).count(PUSH) == 1, "the server received it once")

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "denied", PUSH + " --tags")
            code = await anyio.to_thread.run_sync(wait_for_code, run)
            done = await anyio.to_thread.run_sync(approve_cli, run, "--deny", code)
            check(done.returncode == 0, f"`mcpwall approve --deny CODE` succeeds ({done.stderr!r})")
        r = results.get("denied")
        refused_ = isinstance(r, MCPError) or (isinstance(r, types.CallToolResult) and r.is_error)
        check(refused_, f"the denied call is refused (got {r!r})"[:200])
        if isinstance(r, MCPError):
            check("mcpwall approve" not in r.message, "the refusal does not name the verb")
    check(PUSH + " --tags" not in pushes_received(run), "the denied call never reached the server")
    pending = run.home / ".mcpwall" / "pending"
    left = list(pending.glob("*")) if pending.exists() else []
    check(not left, f"decided calls leave the queue ({left})")
    no_approve_verb(tap)
    audited(run, "ask", "cli")
    audited(run, "approved", "cli")
    audited(run, "declined", "cli")


async def disconnect(run: trust.Run) -> None:
    policy(run, 60)
    async with session(run) as (s, tap):
        await trust.start(s)
        async with anyio.create_task_group() as tg:
            async def call():
                try:
                    await s.call_tool("run_command", {"command": PUSH})
                except Exception:
                    pass
            tg.start_soon(call)
            await anyio.to_thread.run_sync(wait_for_code, run)
            tg.cancel_scope.cancel()
    # The client closed mcpwall's stdin on leaving the session.
    pending = run.home / ".mcpwall" / "pending"
    deadline = time.monotonic() + 15
    while list(pending.glob("*")) and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    check(not list(pending.glob("*")), f"the call left the queue ({list(pending.glob('*'))})")
    check(PUSH not in pushes_received(run), "the call never reached the server")
    await anyio.sleep(0.3)
    audited(run, "declined", "withdrawn")


SCENARIOS = [
    ("1 elicitation: accepted", elicit_accept),
    ("2 elicitation: declined, cancelled, accepted unchecked", elicit_decline),
    ("3 elicitation: never answered", elicit_timeout),
    ("4 remember: session", remember),
    ("5 no elicitation: mcpwall approve", cli_approve),
    ("6 the client disconnects while a call waits", disconnect),
]


async def run_one(mcpwall: str, title: str, scenario) -> list[str]:
    print(f"== {title}")
    core.FAILED.clear()
    with tempfile.TemporaryDirectory(prefix="mcpwall-ask-") as root:
        run = trust.Run(mcpwall, False, Path(root))
        try:
            with anyio.fail_after(6 * core.STEP_TIMEOUT):
                await scenario(run)
        except BaseException as e:
            leaf = core.first_leaf(e)
            if isinstance(leaf, (KeyboardInterrupt, SystemExit)):
                raise
            reason = str(leaf) if isinstance(leaf, Abort) else f"unexpected {type(leaf).__name__}: {leaf}"
            if not isinstance(leaf, Abort):
                core.traceback.print_exception(leaf)
            print(f"  FAIL: {reason}")
            core.FAILED.append(reason)
    print("  PASS" if not core.FAILED else f"  => FAIL ({len(core.FAILED)} failed)")
    return list(core.FAILED)


async def main(mcpwall: str) -> int:
    only = os.environ.get("ASK_ONLY")
    results = [(t, await run_one(mcpwall, t, f)) for t, f in SCENARIOS if not only or t.startswith(only)]
    print("\n== summary")
    for title, failed in results:
        print(f"  {'FAIL' if failed else 'PASS'}  {title}")
        for what in failed:
            print(f"          - {what}")
    bad = sum(bool(f) for _, f in results)
    print(f"ask: {len(results) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ask.py MCPWALL_BINARY")
    sys.exit(anyio.run(main, sys.argv[1]))
