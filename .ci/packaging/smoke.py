"""The install test's smoke test: one installed mcpwall, from a clean HOME, with no Rust
toolchain on PATH (.ci/dist runs it on every install path).

Usage: smoke.py --label LABEL --target TRIPLE --version VERSION [--wine] [--no-proxy REASON]
                -- MCPWALL_COMMAND...
       smoke.py --label LABEL --url URL --token-file FILE   (`mcpwall serve`, e.g. a container)

MCPWALL_COMMAND is how the install path starts mcpwall: a path (archive, venv), or a
launcher (`npx -y mcpwall-rs@VERSION`, `uvx --from WHEEL mcpwall`). It checks that
1. `mcpwall --version` names VERSION, a commit and TARGET;
2. `mcpwall check` denies a read of an SSH key (built-in defaults: the clean HOME has no
   policy) and allows an ordinary read; `explain-policy` shows the built-in pack;
3. the proxy relays a server's `tools/list` to the official MCP Python SDK client, and denies
   the SSH key read the client then asks for (the fake key never reaches the client). The
   server is the official filesystem server (npm); under Wine, where there is no Windows
   node, it is mcpwall's own built-in scan target (`scan --serve-target`), a Windows process.

Run with the interop venv's Python (tests/interop/.venv: the `mcp` package) and the interop
node_modules (the filesystem server). Prints one line per check; exits non-zero on the first
failure. Every credential here is a fake generated at run time.
"""

import argparse
import json
import os
import random
import shutil
import string
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

ROOT = Path(__file__).resolve().parents[2]
FILESYSTEM_SERVER = ROOT / "tests" / "interop" / "node_modules" / ".bin" / "mcp-server-filesystem"
STEP_TIMEOUT = 120
WINDOWS_HOME = "C:\\Users\\u"


def fake_private_key() -> str:
    body = "".join(random.choice(string.ascii_letters + string.digits) for _ in range(64))
    kind = "OPENSSH " + "PRIVATE KEY"
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----\n"


def frame(id_: int, path: str) -> str:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": id_,
            "method": "tools/call",
            "params": {"name": "read_text_file", "arguments": {"path": path}},
        }
    )


def windows_path(path: Path) -> str:
    """A Unix path as a Windows process under Wine names it (Wine's Z: drive is /)."""
    return "Z:" + str(path).replace("/", "\\")


class Smoke:
    def __init__(self, args, root: Path):
        self.label = args.label
        self.target = args.target
        self.version_wanted = args.version
        self.wine = args.wine
        self.command = args.command
        self.home = root / "home"
        self.project = self.home / "project"
        (self.home / ".ssh").mkdir(parents=True)
        self.project.mkdir()
        self.key = fake_private_key()
        (self.home / ".ssh" / "id_ed25519").write_text(self.key)
        (self.project / "notes.txt").write_text("hello from the project\n")
        self.env = {
            "HOME": str(self.home),
            "PATH": os.environ["PATH"],
            # npx and uvx keep their caches in the clean HOME too.
            "npm_config_cache": str(root / "npm-cache"),
            "UV_CACHE_DIR": str(root / "uv-cache"),
            "UV_TOOL_DIR": str(root / "uv-tools"),
            "PIPX_HOME": str(root / "pipx"),
        }
        for name in ("npm_config_registry", "npm_config_userconfig", "WINEPREFIX", "WINEARCH", "WINEDEBUG", "LANG"):
            if name in os.environ:
                self.env[name] = os.environ[name]
        if self.wine:
            self.env["USERPROFILE"] = WINDOWS_HOME

    def ok(self, what: str):
        print(f"   {self.label}: ok: {what}", flush=True)

    def fail(self, what: str, detail: str = ""):
        print(f"   {self.label}: FAILED: {what}\n{detail}", file=sys.stderr, flush=True)
        sys.exit(1)

    def run(self, args: list, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command + args,
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.project,
            timeout=STEP_TIMEOUT,
        )

    def version(self):
        run = self.run(["--version"])
        line = run.stdout.strip()
        want = f"mcpwall {self.version_wanted} (commit "
        if run.returncode != 0 or not line.startswith(want) or not line.endswith(f", {self.target})"):
            self.fail(f"--version must say `{want}…, {self.target})`", f"exit {run.returncode}: {line!r} {run.stderr}")
        if "(commit unknown" in line:
            self.fail("--version names no commit", line)
        self.ok(line)

    def check(self):
        if self.wine:
            key_path = WINDOWS_HOME + "\\.ssh\\id_ed25519"
            readme = WINDOWS_HOME + "\\project\\notes.txt"
        else:
            key_path, readme = "~/.ssh/id_ed25519", "notes.txt"
        run = self.run(["check", "--format", "json"], frame(1, key_path) + "\n")
        if run.returncode != 1 or '"deny"' not in run.stdout:
            self.fail("check must deny the SSH key read (exit 1)", f"exit {run.returncode}\n{run.stdout}{run.stderr}")
        allowed = self.run(["check"], frame(2, readme) + "\n")
        if allowed.returncode != 0:
            self.fail("check must allow an ordinary read (exit 0)", f"exit {allowed.returncode}\n{allowed.stdout}{allowed.stderr}")
        self.ok("check denies the SSH key read (exit 1), allows an ordinary read (exit 0)")

    def explain_policy(self):
        # The built-in defaults (the clean HOME has no policy): the pack compiles in this
        # build, and its first rule is the SSH-key one `check` just applied.
        run = self.run(["explain-policy"])
        if run.returncode != 0 or "builtin:rules/default.yml" not in run.stdout or "block-ssh-keys" not in run.stdout:
            self.fail("explain-policy must show the built-in pack and its block-ssh-keys rule (exit 0)",
                      f"exit {run.returncode}\n{run.stdout[:2000]}{run.stderr}")
        rules = next((line.strip() for line in run.stdout.splitlines() if line.startswith("Inbound rules")), "?")
        self.ok(f"explain-policy shows the built-in pack ({rules.rstrip(':')})")

    def server(self) -> list:
        if self.wine:
            exe = windows_path(Path(self.command[-1]))
            (self.home / "target-home" / ".target").mkdir(parents=True, exist_ok=True)
            fake_home = windows_path(self.home / "target-home")
            return [exe, "scan", "--serve-target", "--fake-home", fake_home]
        return [str(FILESYSTEM_SERVER), str(self.project)]

    async def proxy(self):
        params = StdioServerParameters(
            command=self.command[0],
            args=self.command[1:] + ["--"] + self.server(),
            env=self.env,
            cwd=str(self.project),
        )
        with anyio.fail_after(STEP_TIMEOUT):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = await session.list_tools()
                    names = sorted(t.name for t in tools.tools)
                    if not names:
                        self.fail("tools/list through the proxy came back empty")
                    key_path = WINDOWS_HOME + "\\.ssh\\id_ed25519" if self.wine else str(self.home / ".ssh" / "id_ed25519")
                    tool = "read_text_file" if "read_text_file" in names else names[0]
                    try:
                        result = await session.call_tool(tool, {"path": key_path})
                        text = json.dumps(result.model_dump(mode="json"))
                        self.fail("the proxy let the SSH key read through", text[:500])
                    except MCPError as err:
                        if err.error.code != -32001:
                            self.fail("the SSH key read was refused, but not by mcpwall", repr(err.error))
                        if self.key.splitlines()[1] in json.dumps(err.error.model_dump(mode="json")):
                            self.fail("the refusal carries the key")
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        self.ok(f"the proxy relays tools/list ({len(names)} tools: {shown}) and denies the key read (-32001)")


async def over_http(label: str, url: str, token: str):
    """tools/list through `mcpwall serve` with the token; without it, 401 and no session."""
    with anyio.fail_after(STEP_TIMEOUT):
        async with httpx2.AsyncClient(timeout=STEP_TIMEOUT) as client:
            body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                               "clientInfo": {"name": "smoke", "version": "0"}}}
            refused = await client.post(url, json=body, headers={"Accept": "application/json, text/event-stream"})
            if refused.status_code != 401:
                print(f"   {label}: FAILED: a request without the token got {refused.status_code}, not 401", file=sys.stderr)
                sys.exit(1)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=STEP_TIMEOUT) as client:
            async with streamable_http_client(url, http_client=client) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    names = sorted(t.name for t in (await session.list_tools()).tools)
    if not names:
        print(f"   {label}: FAILED: tools/list through serve came back empty", file=sys.stderr)
        sys.exit(1)
    print(f"   {label}: ok: 401 without the token; with it, tools/list relayed ({len(names)} tools: {', '.join(names[:3])}, ...)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", required=True)
    parser.add_argument("--target")
    parser.add_argument("--version")
    parser.add_argument("--wine", action="store_true")
    parser.add_argument("--no-proxy", metavar="REASON", help="leave the proxy test out, saying why")
    parser.add_argument("--url")
    parser.add_argument("--token-file")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    if args.url:
        anyio.run(over_http, args.label, args.url, Path(args.token_file).read_text().strip())
        return
    if not (args.target and args.version and args.command):
        parser.error("--target, --version and the mcpwall command are required")
    for tool in ("cargo", "rustc", "rustup"):
        if shutil.which(tool, path=os.environ["PATH"]):
            print(f"{args.label}: `{tool}` is on PATH; the install test runs without a Rust toolchain", file=sys.stderr)
            sys.exit(1)
    if not args.wine and not FILESYSTEM_SERVER.exists():
        print(f"{args.label}: no {FILESYSTEM_SERVER} (install the interop dependencies: .ci/run does)", file=sys.stderr)
        sys.exit(1)
    with tempfile.TemporaryDirectory(prefix="mcpwall-smoke-") as tmp:
        smoke = Smoke(args, Path(tmp))
        smoke.version()
        smoke.check()
        smoke.explain_policy()
        if args.no_proxy:
            print(f"   {args.label}: NOT RUN: the proxy test: {args.no_proxy}", flush=True)
        else:
            anyio.run(smoke.proxy)


if __name__ == "__main__":
    main()
