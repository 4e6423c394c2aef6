#!/usr/bin/env node
// The `mcpwall` command of the npm package mcpwall-rs: starts the native mcpwall binary that
// npm installed with it, from the platform package that matches this machine (an optional
// dependency; npm installs only the one whose `os` and `cpu` fit, nothing is downloaded at
// run time). The binary inherits stdin, stdout and stderr, so MCP frames never pass through
// this script; it only relays signals and the exit status. No other code of mcpwall's is
// JavaScript.
"use strict";

const { spawn } = require("node:child_process");

const PLATFORM_PACKAGES = {
  "linux x64": "mcpwall-rs-linux-x64",
  "linux arm64": "mcpwall-rs-linux-arm64",
  "darwin x64": "mcpwall-rs-darwin-x64",
  "darwin arm64": "mcpwall-rs-darwin-arm64",
  "win32 x64": "mcpwall-rs-win32-x64",
};

function fail(message) {
  process.stderr.write(`mcpwall: ${message}\n`);
  process.exit(2);
}

const key = `${process.platform} ${process.arch}`;
const pkg = PLATFORM_PACKAGES[key];
if (!pkg) {
  fail(
    `there is no prebuilt mcpwall for ${key} (prebuilt: ${Object.keys(PLATFORM_PACKAGES).join(", ")}); ` +
      "build it with a Rust toolchain: cargo install mcpwall"
  );
}
const exeName = process.platform === "win32" ? "mcpwall.exe" : "mcpwall";
let exe;
try {
  exe = require.resolve(`${pkg}/bin/${exeName}`);
} catch {
  fail(
    `the package ${pkg}, which holds mcpwall's binary for ${key}, is not installed. ` +
      "npm leaves optional dependencies out with --omit=optional (or --no-optional); " +
      "install mcpwall-rs again without it"
  );
}

const child = spawn(exe, process.argv.slice(2), { stdio: "inherit", windowsHide: true });
// A signal sent to this process alone (a client stopping the server it started) reaches the
// binary too; mcpwall ends its server with its own grace period.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (err) => fail(`cannot start ${exe}: ${err.message}`));
child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so the parent sees what the binary's parent would have seen.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 2);
});
