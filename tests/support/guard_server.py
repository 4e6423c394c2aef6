#!/usr/bin/env python3
"""A scripted MCP server for tests/guard_e2e.rs.

It serves what the JSON file named by $GUARD_SERVER_SPEC says, so a test can change
the server's tool list between runs:
  {"instructions": str?, "tools": [...], "prompts": [...], "page_size": int?}
tools/list pages by `page_size` with cursors "1", "2", ...; tools/call answers
"called <name>"; every line received is appended to $GUARD_SERVER_LOG.
"""
import json
import os
import sys


def main():
    spec = json.load(open(os.environ["GUARD_SERVER_SPEC"]))
    log = open(os.environ["GUARD_SERVER_LOG"], "a") if os.environ.get("GUARD_SERVER_LOG") else None
    out = sys.stdout
    for line in sys.stdin:
        if log:
            log.write(line)
            log.flush()
        msg = json.loads(line)
        if "id" not in msg or "method" not in msg:
            continue
        method, params = msg["method"], msg.get("params") or {}
        if method == "initialize":
            result = {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {"listChanged": True}, "prompts": {}},
                "serverInfo": {"name": "guard-test", "version": "1"},
            }
            if spec.get("instructions") is not None:
                result["instructions"] = spec["instructions"]
        elif method == "tools/list":
            tools = spec.get("tools", [])
            size = spec.get("page_size") or len(tools) or 1
            start = int(params.get("cursor") or 0) * size
            result = {"tools": tools[start:start + size]}
            if start + size < len(tools):
                result["nextCursor"] = str(start // size + 1)
        elif method == "prompts/list":
            result = {"prompts": spec.get("prompts", [])}
        elif method == "prompts/get":
            result = {"messages": [{"role": "user", "content": {"type": "text", "text": "prompt " + params.get("name", "")}}]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "called " + params.get("name", "")}]}
        elif method == "ping":
            result = {}
        else:
            out.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no such method"}}) + "\n")
            out.flush()
            continue
        out.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
