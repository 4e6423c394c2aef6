# Shared by the gateway benches (http_gateway.sh, fleet_capacity.sh); sourced, not run:
# a work directory and the processes started, both cleaned up on exit; free and listening
# loopback ports; an MCP session opened through a gateway; a process's resident memory.

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "nothing listens on port $1" >&2
    exit 1
}

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# The protocol revision of the sessions the benches open.
version=2025-11-25
# Opens an MCP session through PORT; prints its Mcp-Session-Id.
open_session() {
    local port=$1 id
    id=$(curl -s -D - -o /dev/null "http://127.0.0.1:$port/mcp" \
        -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"'$version'","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}' |
        tr -d '\r' | awk -F': ' 'tolower($1)=="mcp-session-id" {print $2}')
    [ -n "$id" ] || { echo "no session id from port $port" >&2; exit 1; }
    curl -s -o /dev/null "http://127.0.0.1:$port/mcp" -H "Mcp-Session-Id: $id" \
        -H "MCP-Protocol-Version: $version" \
        -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
    echo "$id"
}
