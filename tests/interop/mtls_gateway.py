"""Interop over HTTPS with client certificates: the official MCP Python SDK client, its
httpx client holding a client certificate, through `mcpwall serve --tls-cert --tls-key
--client-ca` to server-everything (stdio). The certificate stands for the identity its
common name (or an alternative name) names; without a valid certificate or token nothing
is forwarded.

Usage: mtls_gateway.py MCPWALL_BINARY
Run from tests/http_gateway.rs. The CA, the certificates and the keys are generated at run
time; the network is loopback only.
"""

import datetime
import ipaddress
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from interop import BIN, STEP_TIMEOUT, check, text_of

EVERYTHING = [str(BIN / "mcp-server-everything"), "stdio"]
ACCEPT = "application/json, text/event-stream"
POLICY = """version: 1
settings:
  default_action: allow
  log_dir: "{log_dir}"
rules:
  - name: bob-may-not-echo
    match: {{tool: echo, identity: bob}}
    action: deny
"""


class Pki:
    """A CA, and certificates it issues, written as PEM files under `dir`."""

    def __init__(self, dir: Path, name: str):
        self.dir = dir
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.name = subject
        self.cert = (
            self._builder(subject, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.ca_pem = self._write(f"{name}-ca.pem", self.cert.public_bytes(serialization.Encoding.PEM))

    def _builder(self, subject: x509.Name, public_key) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.timezone.utc)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(getattr(self, "name", subject))
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
        )

    def _write(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.write_bytes(data)
        return path

    def issue(self, file: str, cn: str, sans: list[x509.GeneralName], usage) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = self._builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]), key.public_key())
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False).sign(self.key, hashes.SHA256())
        cert_path = self._write(f"{file}.pem", cert.public_bytes(serialization.Encoding.PEM))
        key_path = self._write(f"{file}.key", key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        return cert_path, key_path


def tls_context(ca: Path, client: tuple[Path, Path] | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if client:
        ctx.load_cert_chain(str(client[0]), str(client[1]))
    return ctx


@contextmanager
def gateway(mcpwall: str, home: Path, policy: Path, tls: list[str]):
    """`mcpwall serve` over HTTPS on a free loopback port; yields its endpoint URL."""
    proc = subprocess.Popen(
        [mcpwall, "serve", "--listen", "127.0.0.1:0", "-c", str(policy), *tls, "--", *EVERYTHING],
        env={"HOME": str(home), "PATH": os.environ.get("PATH", "")},
        cwd=str(home),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = None
    for line in proc.stderr:
        sys.stderr.write(f"  [serve] {line}")
        m = re.search(r"serving (https://\S+/mcp)", line)
        if m:
            url = m.group(1)
            break
    if url is None:
        proc.wait()
        raise AssertionError(f"mcpwall serve did not start (exit {proc.returncode})")
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


async def sdk_echo(url: str, ctx: ssl.SSLContext, message: str) -> tuple[list[str], str]:
    """The SDK client over HTTPS with this TLS context: the tool names, and the text of an
    echo call's result (or of the error refusing it)."""
    async with httpx2.AsyncClient(verify=ctx, timeout=STEP_TIMEOUT) as client:
        async with streamable_http_client(url, http_client=client) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                tools = [t.name for t in (await session.list_tools()).tools]
                try:
                    return tools, text_of(await session.call_tool("echo", {"message": message}))
                except MCPError as e:
                    return tools, f"refused: {e}"


def raw_initialize(url: str, ctx: ssl.SSLContext) -> int:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}
    r = httpx2.post(url, headers={"Accept": ACCEPT, "Content-Type": "application/json"},
                    content=json.dumps(body), verify=ctx, timeout=STEP_TIMEOUT)
    return r.status_code


async def main(mcpwall: str) -> None:
    with tempfile.TemporaryDirectory(prefix="mcpwall-mtls-") as root:
        root = Path(root)
        home = root / "home"
        home.mkdir()
        for name in ["alice", "bob"]:
            subprocess.run([mcpwall, "token", "add", name], env={"HOME": str(home)},
                           check=True, capture_output=True)
        policy = root / "policy.yml"
        policy.write_text(POLICY.format(log_dir=root / "logs"))
        pki = Pki(root, "clients")
        server = pki.issue("server", "mcpwall test server", [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
                           ExtendedKeyUsageOID.SERVER_AUTH)
        alice = pki.issue("alice", "alice", [], ExtendedKeyUsageOID.CLIENT_AUTH)
        bob = pki.issue("bob", "laptop-42", [x509.DNSName("bob")], ExtendedKeyUsageOID.CLIENT_AUTH)
        mallory = pki.issue("mallory", "mallory", [], ExtendedKeyUsageOID.CLIENT_AUTH)
        rogue = Pki(root, "rogue")
        forged = rogue.issue("forged-alice", "alice", [], ExtendedKeyUsageOID.CLIENT_AUTH)
        tls = ["--tls-cert", str(server[0]), "--tls-key", str(server[1]), "--client-ca", str(pki.ca_pem)]

        print("server-everything through mcpwall serve over HTTPS, client certificates as identities")
        with gateway(mcpwall, home, policy, tls) as url:
            tools, result = await sdk_echo(url, tls_context(pki.ca_pem, alice), "hi from alice")
            check("echo" in tools, "alice's certificate: the SDK lists the tools")
            check("hi from alice" in result and not result.startswith("refused"),
                  "alice's certificate: echo answers")
            tools, result = await sdk_echo(url, tls_context(pki.ca_pem, bob), "hi from bob")
            check("echo" not in tools, "bob (by his alternative name): the tool his rule denies is not listed")
            check(result.startswith("refused") and "bob-may-not-echo" in result and "hi from bob" not in result,
                  "bob's echo is refused by his rule")
            check(raw_initialize(url, tls_context(pki.ca_pem, None)) == 401, "no certificate, no token: 401")
            check(raw_initialize(url, tls_context(pki.ca_pem, mallory)) == 401,
                  "a certificate naming no identity: 401")
            try:
                status = raw_initialize(url, tls_context(pki.ca_pem, forged))
            except (httpx2.HTTPError, ssl.SSLError, OSError):
                status = None
            check(status is None, "a certificate naming alice from another CA: the handshake fails")

        events = [json.loads(l) for p in sorted((root / "logs").glob("*.jsonl"))
                  for l in p.read_text().splitlines() if l.startswith("{")]
        check(any(e.get("identity") == "alice" and e.get("tool") == "echo" and e["action"] == "allow" for e in events),
              "alice's call is audited with her identity")
        check(any(e.get("identity") == "bob" and e.get("rule") == "bob-may-not-echo" for e in events),
              "bob's refused call is audited with his identity and rule")
        check(sum(e.get("rule") == "mcpwall:unauthenticated" for e in events) >= 2,
              "the unauthenticated attempts are audited")
    print("mtls_gateway: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: mtls_gateway.py MCPWALL_BINARY")
    anyio.run(main, sys.argv[1])
