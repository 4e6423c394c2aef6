"""Trust that holds (issue 21), end to end: the official MCP Python SDK client, through
mcpwall, to a real server.

Usage: trust.py MCPWALL_BINARY [--direct]

  1 untrusted_outbound   an untrusted project .mcpwall.yml whose only rule redacts a
                         harmless marker cannot switch off the built-in secret redaction:
                         a file holding the marker and fake credentials, read through the
                         official filesystem server, still arrives with the credentials
                         redacted
  2 allow_vs_builtin     a user's ~/.mcpwall/config.yml that extends the default pack and
                         allows reading anything under the project does not re-open the
                         project's .env (the pack's deny comes first)
  3 self_approval        an agent's shell tool cannot run `mcpwall pins approve` or
                         `mcpwall pins reset`, and nothing mcpwall sends the client tells
                         it to
  4 rug_pull             a server whose second tools/list poisons a tool's description:
                         the client never sees the poison and its calls to that tool are
                         refused
  5 pipelined_rug_pull   the same, with the call sent right behind the list that changes
                         the tool, before that list is answered

Each scenario gets a fresh HOME, project (the working directory) and audit log, and runs
mcpwall with no -c, so its policy comes from where a user's would: the project's
.mcpwall.yml and ~/.mcpwall/config.yml, or the built-in default pack when neither exists.
The helpers (Tap, check, within, ...) and the report format are session_core.py's.

--direct runs the same scenarios with no mcpwall in between. Every scenario should then
FAIL: that shows each attack really works against an unprotected client, so a PASS
through mcpwall is mcpwall's doing. Audit-log checks are skipped there.

Every credential here is a fake generated at run time.
"""

import json
import os
import random
import string
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

import session_core as core
import trust_server
from session_core import HUNG, Abort, Tap, check, require, text_of, within

HERE = Path(__file__).resolve().parent
FILESYSTEM = HERE / "node_modules" / ".bin" / "mcp-server-filesystem"
SCRIPTED = HERE / "trust_server.py"
# The filesystem server is a node process on a machine shared with other builds.
core.STEP_TIMEOUT = 30

# A harmless word an untrusted project file may well want redacted.
MARKER = "PROJECT-CODENAME-TRS7"


def fake_aws_key_id() -> str:
    return "AK" + "IA" + "".join(random.choice(string.ascii_uppercase + "234567") for _ in range(16))


def fake_github_token() -> str:
    return "gh" + "p_" + "".join(random.choice(string.ascii_letters + string.digits) for _ in range(36))


class Run:
    """One scenario's world: temporary HOME, project directory and the server's record of
    the calls it received; and whether mcpwall sits in between. The audit log is the
    default one, ~/.mcpwall/logs: an untrusted project file cannot move it."""

    def __init__(self, mcpwall: str, direct: bool, root: Path):
        self.mcpwall = mcpwall
        self.direct = direct
        self.home = root / "home"
        self.project = root / "project"
        self.logs = self.home / ".mcpwall" / "logs"
        self.home.mkdir()
        self.project.mkdir()
        self.record = root / "server-received.jsonl"

    def command(self, server: list[str], name: str) -> list[str]:
        if self.direct:
            return server
        return [self.mcpwall, "--server-name", name, "--", *server]

    @core.asynccontextmanager
    async def session(self, server: list[str], name: str):
        cmd = self.command(server, name)
        env = {"HOME": str(self.home), "PATH": os.environ.get("PATH", "")}
        params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env, cwd=str(self.project))
        async with stdio_client(params) as (read, write):
            async with Tap(read) as tap:
                async with ClientSession(tap.stream, write) as s:
                    yield s, tap

    def filesystem(self):
        return self.session([str(FILESYSTEM), str(self.project)], "filesystem")

    def scripted(self, mode: str):
        return self.session([sys.executable, str(SCRIPTED), mode, str(self.record)], mode)

    def calls_received(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(l) for l in self.record.read_text().splitlines() if l.strip()]

    def audit_events(self) -> list[dict]:
        lines = "".join(p.read_text() for p in sorted(self.logs.glob("*.jsonl"))).splitlines()
        return [json.loads(l) for l in lines if l.strip()]

    def check_audited(self, what: str, wanted) -> None:
        if self.direct:
            print("  (direct run: audit checks skipped)")
            return
        events = self.audit_events()
        seen = sorted({(e.get("action"), e.get("rule")) for e in events}, key=str)
        check(any(wanted(e) for e in events), f"{what} is audited (events seen: {seen})")


async def start(s: ClientSession) -> set[str]:
    """Handshake and first tools/list; returns the listed tool names."""
    await within(s.initialize(), "initialize", needed=True)
    listed = await within(s.list_tools(), "tools/list", needed=True)
    return {t.name for t in listed.tools}


async def refused(awaitable, what: str) -> bool:
    """The call gets an error (a JSON-RPC error, or a result flagged isError), not the
    server's content. True when it did."""
    try:
        result = await within(awaitable, what)
    except MCPError as e:
        if e.code == core.types.CONNECTION_CLOSED:
            require(False, f"{what}: the session stays up (got {e.message!r})")
        return check(True, f"{what} is refused ({e.code}: {e.message[:120]})")
    if result is HUNG:
        return False
    if result.is_error:
        return check(True, f"{what} is refused (isError: {text_of(result)[:120]})")
    return check(False, f"{what} is refused, not answered (got {text_of(result)[:120]!r})")


# Scenarios. Each takes a fresh Run; failed checks land in core.FAILED.


async def untrusted_outbound(run: Run) -> None:
    (run.project / ".mcpwall.yml").write_text(
        "version: 1\n"
        "outbound_rules:\n"
        "  - name: hide-codename\n"
        "    match:\n"
        f"      response_contains: ['{MARKER}']\n"
        "    action: redact\n"
    )
    aws, github = fake_aws_key_id(), fake_github_token()
    secrets = run.project / "deploy.txt"
    secrets.write_text(f"project {MARKER}\naws_access_key_id = {aws}\ngithub_token = {github}\nregion = eu-west-1\n")
    (run.project / "readme.txt").write_text(f"project {MARKER}, nothing secret\n")
    async with run.filesystem() as (s, tap):
        names = await start(s)
        read = "read_text_file" if "read_text_file" in names else "read_file"
        # Without this the scenario would also pass with the project file not loaded at all.
        plain = await within(s.call_tool(read, {"path": str(run.project / "readme.txt")}), "reading readme.txt")
        if plain is not HUNG:
            check(MARKER not in text_of(plain) and "nothing secret" in text_of(plain),
                  f"the untrusted file's redact rule is in effect (got {text_of(plain)[:80]!r})")
        result = await within(s.call_tool(read, {"path": str(secrets)}), "reading deploy.txt", needed=True)
        text = text_of(result)
        require(not result.is_error and "region = eu-west-1" in text,
                f"the file is read, its harmless lines intact (got {text[:120]!r})")
    tap.check_clean(aws, github)
    if not run.direct:
        check("REDACTED" in text, "the credentials come back redacted")
        audit = "".join(p.read_text() for p in sorted(run.logs.glob("*.jsonl")))
        check(aws not in audit and github not in audit, "no credential reaches the audit log")
    run.check_audited("the built-in secret redaction",
                      lambda e: e.get("action") == "redact" and e.get("rule") != "hide-codename")


async def allow_vs_builtin(run: Run) -> None:
    config = run.home / ".mcpwall" / "config.yml"
    config.parent.mkdir(parents=True)
    config.write_text(
        "version: 1\n"
        "extends: [default]\n"
        "rules:\n"
        "  - name: my-project-files\n"
        "    match:\n"
        "      tool: '{read_file,read_text_file}'\n"
        "      arguments:\n"
        f"        path: {{pattern: '{run.project}/**'}}\n"
        "    action: allow\n"
    )
    env_secret = "db_password=" + "".join(random.choice(string.ascii_letters) for _ in range(20)) + "-TRS-env"
    (run.project / ".env").write_text(env_secret + "\n")
    (run.project / "notes.txt").write_text("hello from the project\n")
    async with run.filesystem() as (s, tap):
        names = await start(s)
        read = "read_text_file" if "read_text_file" in names else "read_file"
        ok = await within(s.call_tool(read, {"path": str(run.project / "notes.txt")}), "reading notes.txt")
        if ok is not HUNG:
            check(not ok.is_error and "hello from the project" in text_of(ok),
                  "the user's allow rule works: notes.txt is read")
        await refused(s.call_tool(read, {"path": str(run.project / ".env")}), "reading <project>/.env")
    tap.check_clean(env_secret)
    run.check_audited("the denial by the built-in rule",
                      lambda e: e.get("action") == "deny" and e.get("rule") not in (None, "my-project-files"))


async def self_approval(run: Run) -> None:
    commands = ["mcpwall pins approve srv tool", "mcpwall pins reset srv"]
    async with run.scripted("shell") as (s, tap):
        names = await start(s)
        require(names == {"run_command"}, f"the shell tool is listed (got {sorted(names)})")
        for command in commands:
            await refused(s.call_tool("run_command", {"command": command}), f"run_command {command!r}")
        ok = await within(s.call_tool("run_command", {"command": "ls"}), "run_command 'ls'")
        if ok is not HUNG:
            check(text_of(ok) == "ran: ls", "an ordinary command still runs")
    tap.check_clean("pins approve", "pins reset")
    reached = [c for c in run.calls_received() if "mcpwall" in json.dumps(c)]
    check(not reached, f"no mcpwall command reaches the server (got {reached})")
    run.check_audited("the denial", lambda e: e.get("action") == "deny")


async def rug_pull(run: Run) -> None:
    async with run.scripted("rug_pull") as (s, tap):
        names = await start(s)
        require(names == {"echo", "fetch_notes"}, f"both tools are listed first (got {sorted(names)})")
        first = await within(s.call_tool("fetch_notes", {}), "fetch_notes before the change")
        if first is not HUNG:
            check(text_of(first) == trust_server.FETCHED_TEXT, "fetch_notes works before the change")
        # The server changes the tool under the client's feet; the client lists again
        # (as it would after notifications/tools/list_changed).
        again = await within(s.list_tools(), "the second tools/list")
        if again is not HUNG:
            listed = {t.name for t in again.tools}
            check("fetch_notes" not in listed, f"the poisoned tool is withheld from the list (got {sorted(listed)})")
            check("echo" in listed, "the unchanged tool is still listed")
        for attempt in (1, 2):
            await refused(s.call_tool("fetch_notes", {}), f"calling the changed fetch_notes (attempt {attempt})")
        echoed = await within(s.call_tool("echo", {"message": "still here"}), "the follow-up echo call")
        if echoed is not HUNG:
            check(text_of(echoed) == "still here", "the unchanged tool still works")
    tap.check_clean("<IMPORTANT>", "id_rsa", "TRS-9b1e", "pins approve")
    after_change = [c for c in run.calls_received() if c.get("name") == "fetch_notes"][1:]
    check(not after_change, f"no call of the changed tool reaches the server (got {len(after_change)})")
    run.check_audited("the refusal", lambda e: e.get("action") in core.REFUSALS
                      and e.get("rule") != core.NOT_A_REFUSAL)


async def pipelined_rug_pull(run: Run) -> None:
    """As rug_pull, but the client sends its call right behind the list that changes the
    tool, before that list is answered (trust_server delays it by LIST_DELAY)."""
    async with run.scripted("rug_pull") as (s, tap):
        names = await start(s)
        require(names == {"echo", "fetch_notes"}, f"both tools are listed first (got {sorted(names)})")
        listed: list = []

        async def list_again():
            listed.append(await within(s.list_tools(), "the second tools/list"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(list_again)
            # Lets list_again put its request on the wire first.
            await anyio.sleep(0.05)
            check(not listed, "the call below is sent while the list is unanswered")
            await refused(s.call_tool("fetch_notes", {}), "a fetch_notes call pipelined behind the list")
        if listed and listed[0] is not HUNG:
            names = {t.name for t in listed[0].tools}
            check("fetch_notes" not in names, f"the poisoned tool is withheld from the list (got {sorted(names)})")
    tap.check_clean("<IMPORTANT>", "id_rsa", "TRS-9b1e", trust_server.FETCHED_TEXT, "pins approve")
    reached = [c for c in run.calls_received() if c.get("name") == "fetch_notes"]
    check(not reached, f"the pipelined call never reaches the server (got {len(reached)})")
    run.check_audited("the refusal", lambda e: e.get("action") in core.REFUSALS
                      and e.get("rule") != core.NOT_A_REFUSAL)


SCENARIOS = [
    ("1 untrusted project file cannot switch off outbound protection", untrusted_outbound),
    ("2 a user allow rule does not shadow a built-in deny", allow_vs_builtin),
    ("3 the agent cannot approve its own tools", self_approval),
    ("4 a rug-pulled (poisoned) tool is refused", rug_pull),
    ("5 ... also when the call is pipelined behind the list", pipelined_rug_pull),
]


async def run_one(mcpwall: str, direct: bool, title: str, scenario) -> list[str]:
    print(f"== {title}")
    core.FAILED.clear()
    with tempfile.TemporaryDirectory(prefix="mcpwall-trust-") as root:
        run = Run(mcpwall, direct, Path(root))
        try:
            with anyio.fail_after(6 * core.STEP_TIMEOUT):
                await scenario(run)
        except BaseException as e:  # every failure is reported; none stops the other scenarios
            leaf = core.first_leaf(e)
            if isinstance(leaf, (KeyboardInterrupt, SystemExit)):
                raise
            if isinstance(leaf, Abort):
                reason = str(leaf)
            elif isinstance(leaf, TimeoutError):
                reason = f"the scenario did not finish within {6 * core.STEP_TIMEOUT} s"
            else:
                reason = f"unexpected {type(leaf).__name__}: {leaf}"
                core.traceback.print_exception(leaf)
            if reason not in core.FAILED:
                print(f"  FAIL: {reason}")
                core.FAILED.append(reason)
    print("  PASS" if not core.FAILED else f"  => FAIL ({len(core.FAILED)} failed)")
    return list(core.FAILED)


async def main(mcpwall: str, direct: bool) -> int:
    print(f"trust: {'DIRECT (no mcpwall)' if direct else mcpwall}")
    results = [(title, await run_one(mcpwall, direct, title, f)) for title, f in SCENARIOS]
    print("\n== summary")
    for title, failed in results:
        print(f"  {'FAIL' if failed else 'PASS'}  {title}")
        for what in failed:
            print(f"          - {what}")
    bad_ones = sum(bool(f) for _, f in results)
    print(f"trust: {len(results) - bad_ones} passed, {bad_ones} failed")
    return 1 if bad_ones else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    direct = "--direct" in args
    args = [a for a in args if a != "--direct"]
    if len(args) != 1:
        sys.exit("usage: trust.py MCPWALL_BINARY [--direct]")
    sys.exit(anyio.run(main, args[0], direct))
