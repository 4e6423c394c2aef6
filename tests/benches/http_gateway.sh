#!/usr/bin/env bash
# `mcpwall serve` against a plain reverse proxy of the same shape (issue #25's measure).
#
#   tests/benches/http_gateway.sh [MCPWALL_BINARY]     (default: target/release/mcpwall)
#
# The shape: load generator → proxy → a Streamable HTTP MCP server on loopback.
# - upstream (UPSTREAM=everything, the default): the official
#   `@modelcontextprotocol/server-everything` in its streamableHttp mode
#   (tests/interop/node_modules; `.ci/run` or `npm ci` in tests/interop installs it), and
#   `tools/call echo`. It spends about 2.5 ms per call, which hides what a proxy adds;
# - upstream (UPSTREAM=fake): a fast one, the shared harness's fake server
#   (FAKE_MCP_SERVER=path to its `fake-mcp-server`, built by ../shared/bench/compare.sh)
#   made a Streamable HTTP server by a second `mcpwall serve` with a policy that allows
#   everything, and `tools/call read_file`: both proxies then wait on the same fast server;
# - plain:    nginx as a reverse proxy to it (one worker process, keep-alive upstream
#   connections, no buffering): what a gateway without a policy costs;
# - mcpwall:  `mcpwall serve --upstream` to the same server, the built-in default policy
#   (an empty HOME), every request and answer judged and audited;
# - direct:   the load generator against the server itself (the floor).
# mcpwall's gateway runs on one thread (a current-thread runtime), hence one nginx worker.
#
# Load generator: wrk (Debian's package): event-driven C with a Lua hook for the POST body
# and headers, so the generator costs little next to what it measures, and it reports
# latency percentiles. Each target gets one MCP session (initialize through that target),
# then wrk sends `tools/call echo` on it for SECONDS_EACH seconds, from one connection (the
# latency each hop adds) and from 8 (requests/s under load).
# Rounds rotate the order of the targets; the table shows medians over rounds.
#
# Then the resident memory of an idle session: SESSIONS sessions opened through
# `mcpwall serve --upstream` (initialize, initialized, nothing else), mcpwall's RSS before
# and after (the server's own memory is not counted: it is another process).
#
# Needs: wrk, nginx, node, curl (apt-get install wrk nginx-light).
# Environment: ROUNDS (3), SECONDS_EACH (8), CONNECTIONS ("1 8": one run per count), SESSIONS (200).
set -euo pipefail
cd "$(dirname "$0")/../.."

mcpwall=$(realpath "${1:-target/release/mcpwall}")
rounds=${ROUNDS:-3}
seconds=${SECONDS_EACH:-8}
read -ra connection_counts <<<"${CONNECTIONS:-1 8}"
sessions=${SESSIONS:-200}
everything=tests/interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js
for tool in wrk nginx node curl; do
    command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install wrk nginx-light)" >&2; exit 2; }
done
upstream_kind=${UPSTREAM:-everything}
case $upstream_kind in
    everything)
        [ -f "$everything" ] || { echo "needs $everything: (cd tests/interop && npm ci)" >&2; exit 2; }
        call='"name":"echo","arguments":{"message":"hello from the bench"}' ;;
    fake)
        [ -x "${FAKE_MCP_SERVER:-}" ] || { echo "UPSTREAM=fake needs FAKE_MCP_SERVER=path/to/fake-mcp-server" >&2; exit 2; }
        call='"name":"read_file","arguments":{"path":"README.md"}' ;;
    *) echo "UPSTREAM is everything or fake" >&2; exit 2 ;;
esac

# shellcheck source=tests/benches/gateway_lib.sh
source tests/benches/gateway_lib.sh

up=$(free_port)
if [ "$upstream_kind" = everything ]; then
    PORT=$up node "$everything" streamableHttp >"$work/upstream.log" 2>&1 &
else
    mkdir -p "$work/upstream-home"
    # Only the user's rules, and none: the upstream judges nothing it would refuse.
    printf 'version: 1\nrules: []\n' >"$work/allow-all.yml"
    HOME=$work/upstream-home "$mcpwall" serve -c "$work/allow-all.yml" --listen "127.0.0.1:$up" \
        -- "$FAKE_MCP_SERVER" >"$work/upstream.log" 2>&1 &
fi
pids+=($!)
wait_port "$up"

plain=$(free_port)
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $work/nginx/pid;
error_log $work/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    upstream mcp { server 127.0.0.1:$up; keepalive 64; }
    server {
        listen 127.0.0.1:$plain;
        location / {
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$http_host;
            proxy_buffering off;
        }
    }
}
EOF
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
nginx_pid=$!
pids+=($nginx_pid)
wait_port "$plain"

gateway=$(free_port)
mkdir -p "$work/home"
HOME=$work/home "$mcpwall" serve --listen "127.0.0.1:$gateway" --upstream "http://127.0.0.1:$up/mcp" \
    2>"$work/mcpwall.log" &
mcpwall_pid=$!
pids+=($mcpwall_pid)
wait_port "$gateway"


# CPU time (user + system, clock ticks) of PID and its children (nginx's worker).
cpu_ticks() {
    local total=0 pid
    for pid in "$1" $(cat "/proc/$1/task/$1/children" 2>/dev/null); do
        total=$(( total + $(awk '{print $14 + $15}' "/proc/$pid/stat") ))
    done
    echo "$total"
}

# wrk against PORT on SESSION from CONNECTIONS connections, the proxy being PID (none for
# direct); prints "requests/s p50-ms proxy-CPU-µs-per-request".
load() {
    local port=$1 session=$2 connections=$3 pid=$4 before=0 after=0
    cat >"$work/post.lua" <<EOF
wrk.method = "POST"
-- A request id of its own for every request: answers are routed to requests by id.
local next_id = 0
request = function()
    next_id = next_id + 1
    return wrk.format(nil, nil, nil, string.format(
        '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{$call}}',
        next_id))
end
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Mcp-Session-Id"] = "$session"
wrk.headers["MCP-Protocol-Version"] = "$version"
done = function(summary, latency, requests)
    io.write(string.format("RESULT %.1f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
        latency:percentile(50) / 1000, summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
EOF
    local out
    [ "$pid" = none ] || before=$(cpu_ticks "$pid")
    out=$(wrk -t1 -c"$connections" -d"${seconds}s" -s "$work/post.lua" "http://127.0.0.1:$port/mcp" | grep '^RESULT')
    read -r _ rps p50 status_errors socket_errors <<<"$out"
    if [ "$status_errors" != 0 ] || [ "$socket_errors" != 0 ]; then
        echo "port $port: $status_errors non-2xx answers, $socket_errors socket errors" >&2
        exit 1
    fi
    [ "$pid" = none ] || after=$(cpu_ticks "$pid")
    awk -v r="$rps" -v p="$p50" -v t=$(( after - before )) -v s="$seconds" -v hz="$(getconf CLK_TCK)" \
        'BEGIN {printf "%s %s %.1f\n", r, p, t / hz * 1e6 / (r * s)}'
}

declare -A port=([direct]=$up [plain]=$plain [mcpwall]=$gateway)
declare -A proxy=([direct]=none [plain]=$nginx_pid [mcpwall]=$mcpwall_pid)
declare -A session
for t in direct plain mcpwall; do session[$t]=$(open_session "${port[$t]}"); done
# A check that the echo goes through each target before timing it.
for t in direct plain mcpwall; do
    curl -s "http://127.0.0.1:${port[$t]}/mcp" -H "Mcp-Session-Id: ${session[$t]}" \
        -H "MCP-Protocol-Version: $version" \
        -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{'"$call"'}}' |
        grep -q '"result"' || { echo "$t: the call was not answered" >&2; exit 1; }
done

targets=(direct plain mcpwall)
for round in $(seq "$rounds"); do
    for c in "${connection_counts[@]}"; do
        for i in 0 1 2; do
            t=${targets[$(( (i + round) % 3 ))]}
            echo "$c $t $(load "${port[$t]}" "${session[$t]}" "$c" "${proxy[$t]}")" >>"$work/results"
        done
    done
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
for c in "${connection_counts[@]}"; do
    echo
    echo "upstream $upstream_kind, $c connection(s), medians of $rounds rounds of ${seconds} s"
    echo
    echo "| target | requests/s | p50 latency | requests/s vs plain | p50 vs plain | proxy CPU per request |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: |"
    col() { awk -v c="$c" -v t="$1" -v f="$2" '$1==c && $2==t {print $f}' "$work/results" | median; }
    plain_rps=$(col plain 3)
    plain_p50=$(col plain 4)
    for t in direct plain mcpwall; do
        awk -v t="$t" -v r="$(col "$t" 3)" -v p="$(col "$t" 4)" -v c="$(col "$t" 5)" \
            -v pr="$plain_rps" -v pp="$plain_p50" \
            'BEGIN {printf "| %s | %.0f | %.2f ms | %.2fx | %.2fx | %s |\n", t, r, p, r / pr, p / pp,
                t == "direct" ? "-" : sprintf("%.0f µs", c)}'
    done
done

before=$(rss_kib "$mcpwall_pid")
for _ in $(seq "$sessions"); do open_session "$gateway" >/dev/null; done
sleep 1
after=$(rss_kib "$mcpwall_pid")
echo
awk -v b="$before" -v a="$after" -v n="$sessions" \
    'BEGIN {printf "mcpwall serve RSS: %.1f MiB, %.1f MiB with %d more idle sessions: %.1f KiB each\n", b / 1024, a / 1024, n, (a - b) / n}'
