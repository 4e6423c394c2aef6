"""Interop: the official MCP Python SDK as the client, through mcpwall, to the official
npm servers (server-filesystem, server-everything).

Usage: interop.py MCPWALL_BINARY
Run from tests/proxy_interop.rs (part of `cargo test`), with the venv and node_modules
that .ci/run installs next to this file. Exits non-zero on the first failure.

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
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

HERE = Path(__file__).resolve().parent
BIN = HERE / "node_modules" / ".bin"
STEP_TIMEOUT = 60


def fake_aws_key_id() -> str:
    alphabet = string.ascii_uppercase + "234567"
    return "AKIA" + "".join(random.choice(alphabet) for _ in range(16))


def fake_private_key() -> str:
    body = "".join(random.choice(string.ascii_letters + string.digits) for _ in range(64))
    kind = "RSA " + "PRIVATE KEY"
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----\n"


POLICY = """version: 1
extends: [default]
settings:
  log_dir: "{log_dir}"
rules:
  - name: interop-no-ssh
    match:
      method: "*"
      arguments:
        _any_value: {{regex: '(^|/)\\.ssh(/|$)'}}
    action: deny
    message: "SSH keys are off limits"
outbound_rules:
  - name: interop-redact-secrets
    match: {{secrets: true}}
    action: redact
"""


class Env:
    def __init__(self, mcpwall: str, root: Path):
        self.mcpwall = mcpwall
        self.home = root / "home"
        self.project = self.home / "project"
        (self.home / ".ssh").mkdir(parents=True)
        self.project.mkdir()
        self.private_key = fake_private_key()
        (self.home / ".ssh" / "id_rsa").write_text(self.private_key)
        self.aws_key = fake_aws_key_id()
        (self.project / "creds.txt").write_text(f"aws_access_key_id = {self.aws_key}\nregion = eu-west-1\n")
        (self.project / "notes.txt").write_text("hello from the project\n")
        self.policy = root / "policy.yml"
        self.policy.write_text(POLICY.format(log_dir=root / "logs"))
        self.logs = root / "logs"

    def params(self, server: list[str], through_mcpwall: bool, name: str) -> StdioServerParameters:
        env = {
            "HOME": str(self.home),
            "PATH": os.environ.get("PATH", ""),
        }
        if through_mcpwall:
            command = self.mcpwall
            args = ["-c", str(self.policy), "--server-name", name, "--", *server]
        else:
            command, args = server[0], server[1:]
        return StdioServerParameters(command=command, args=args, env=env, cwd=str(self.project))


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)
    print(f"  ok: {what}")


def text_of(result) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def filesystem(env: Env) -> None:
    print("server-filesystem through mcpwall")
    server = [str(BIN / "mcp-server-filesystem"), str(env.home)]
    async with stdio_client(env.params(server, True, "filesystem")) as (r, w):
        async with ClientSession(r, w) as s:
            with anyio.fail_after(STEP_TIMEOUT):
                init = await s.initialize()
                check(init.server_info.name != "", "handshake completes")
                tools = await s.list_tools()
                names = {t.name for t in tools.tools}
                check("read_text_file" in names or "read_file" in names, f"tools list ({len(names)} tools)")
                read = "read_text_file" if "read_text_file" in names else "read_file"

                ok = await s.call_tool(read, {"path": str(env.project / "notes.txt")})
                check(not ok.is_error and "hello from the project" in text_of(ok), "allowed read works")

                try:
                    denied = await s.call_tool(read, {"path": str(env.home / ".ssh" / "id_rsa")})
                    raise AssertionError(f"reading ~/.ssh/id_rsa was not denied: {denied}")
                except MCPError as e:
                    check(e.code == -32001, f"reading ~/.ssh/id_rsa is denied ({e.message})")
                    check("BEGIN" not in e.message, "the denial carries no key bytes")

                creds = await s.call_tool(read, {"path": str(env.project / "creds.txt")})
                text = text_of(creds)
                check(env.aws_key not in text, "the planted AWS key id does not come back")
                check("[REDACTED BY MCPWALL]" in text and "region = eu-west-1" in text,
                      "it comes back redacted, the rest intact")

    logs = "".join(p.read_text() for p in sorted(env.logs.glob("*.jsonl")))
    check(env.aws_key not in logs and env.private_key.splitlines()[1] not in logs,
          "no secret reaches the audit log")
    events = [json.loads(l) for l in logs.splitlines()]
    # The pack this policy extends decides first: its deny rules come before the file's own.
    check(any(e["action"] == "deny" and e["rule"] == "block-ssh-keys" for e in events),
          "the denial is audited (by the extended pack's rule, which comes first)")
    check(any(e["action"] == "redact" for e in events), "the redaction is audited")


async def everything_transcript(env: Env, through_mcpwall: bool, connect=None) -> dict:
    """Exercise every feature of server-everything that the policy does not deny and
    return what the client saw, normalised for comparison. `connect`, when given, makes
    the client's transport (http_gateway.py: Streamable HTTP through `mcpwall serve`)."""
    seen: dict = {"sampling": [], "elicitation": [], "progress": [], "logging": 0}

    async def sampling(ctx, params: types.CreateMessageRequestParams):
        seen["sampling"].append([m.content.text for m in params.messages if m.content.type == "text"])
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="sampled reply"), model="fake-model"
        )

    async def elicitation(ctx, params):
        seen["elicitation"].append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada", "check": True})

    async def logging(params: types.LoggingMessageNotificationParams):
        seen["logging"] += 1

    async def progress(p: float, total, message):
        seen["progress"].append((p, total))

    out: dict = {}
    server = [str(BIN / "mcp-server-everything"), "stdio"]
    name = "everything"
    transport = connect() if connect else stdio_client(env.params(server, through_mcpwall, name))
    async with transport as (r, w):
        async with ClientSession(
            r, w, sampling_callback=sampling, elicitation_callback=elicitation, logging_callback=logging
        ) as s:
            with anyio.fail_after(STEP_TIMEOUT):
                init = await s.initialize()
                out["server"] = init.server_info.name
                out["capabilities"] = init.capabilities.model_dump(mode="json")
                out["tools"] = sorted(t.name for t in (await s.list_tools()).tools)
                out["prompts"] = sorted(p.name for p in (await s.list_prompts()).prompts)
                resources = (await s.list_resources()).resources
                out["resources"] = sorted(str(r.uri) for r in resources)
                out["templates"] = sorted(
                    t.uri_template for t in (await s.list_resource_templates()).resource_templates
                )
                first = sorted(resources, key=lambda r: str(r.uri))[0]
                out["read"] = (await s.read_resource(first.uri)).model_dump(mode="json")
                out["simple-prompt"] = (await s.get_prompt("simple-prompt")).model_dump(mode="json")
                out["args-prompt"] = (
                    await s.get_prompt("args-prompt", {"city": "Lyon", "state": "ARA"})
                ).model_dump(mode="json")
                out["complete"] = (
                    await s.complete(
                        types.PromptReference(type="ref/prompt", name="completable-prompt"),
                        {"name": "department", "value": "E"},
                    )
                ).model_dump(mode="json")
                out["echo"] = (await s.call_tool("echo", {"message": "hi there"})).model_dump(mode="json")
                out["sum"] = (await s.call_tool("get-sum", {"a": 2, "b": 40})).model_dump(mode="json")
                out["image"] = (await s.call_tool("get-tiny-image", {})).model_dump(mode="json")
                out["structured"] = (
                    await s.call_tool("get-structured-content", {"location": "Chicago"})
                ).model_dump(mode="json")
                out["sampling-tool"] = (
                    await s.call_tool("trigger-sampling-request", {"prompt": "say hi", "maxTokens": 5})
                ).model_dump(mode="json")
                out["elicitation-tool"] = (
                    await s.call_tool("trigger-elicitation-request", {})
                ).model_dump(mode="json")
                out["long-running"] = (
                    await s.call_tool(
                        "trigger-long-running-operation", {"duration": 1, "steps": 3}, progress_callback=progress
                    )
                ).model_dump(mode="json")
                await s.set_logging_level("debug")
                await s.call_tool("toggle-simulated-logging", {})
                with anyio.move_on_after(8):
                    while seen["logging"] == 0:
                        await anyio.sleep(0.1)
                await s.call_tool("toggle-simulated-logging", {})
                await s.send_ping()
    out["sampling-seen"] = seen["sampling"]
    out["elicitation-seen"] = len(seen["elicitation"])
    out["progress-seen"] = seen["progress"]
    out["logging-seen"] = seen["logging"] > 0
    return out


async def everything(env: Env) -> None:
    print("server-everything: direct vs through mcpwall")
    direct = await everything_transcript(env, False)
    proxied = await everything_transcript(env, True)
    check(direct["logging-seen"] and direct["progress-seen"] and direct["sampling-seen"],
          "the direct run exercised logging, progress and sampling")
    for key in direct:
        if direct[key] != proxied[key]:
            print(f"  DIFF in {key}:\n    direct:  {json.dumps(direct[key])[:600]}\n    mcpwall: {json.dumps(proxied[key])[:600]}")
        check(direct[key] == proxied[key], f"{key} is the same with and without mcpwall")


async def main(mcpwall: str) -> None:
    with tempfile.TemporaryDirectory(prefix="mcpwall-interop-") as root:
        env = Env(mcpwall, Path(root))
        await filesystem(env)
        await everything(env)
    print("interop: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: interop.py MCPWALL_BINARY")
    anyio.run(main, sys.argv[1])
