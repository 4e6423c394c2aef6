#!/usr/bin/env bash
# What a fleet of `mcpwall serve` replicas costs and carries (docs/fleet.md, "Capacity"):
# 1 and 3 replicas behind HAProxy (docs/fleet/haproxy.cfg, as documented) sharing rate
# limits and breakers in Redis, each session's server the shared harness's fast fake server.
#
#   tests/benches/fleet_capacity.sh [MCPWALL_BINARY]    (default: target/release/mcpwall)
#
# For each replica count: SESSIONS sessions opened through HAProxy (round robin spreads
# them), then wrk sends `tools/call read_file` on them, one connection per session, for
# SECONDS_EACH seconds. Reported: requests/s and p50 through the load balancer; CPU per
# request of the replicas (their own threads, not their servers), of HAProxy and of
# redis-server; Redis commands per request (INFO commandstats: the scripts' own commands
# included); then a replica's resident memory per idle session (the session's server is a
# process of its own, not counted). Also the same load on one replica with no shared state,
# the single-process default, for the cost of Redis.
#
# Needs: redis-server, redis-cli, haproxy, wrk, python3, and FAKE_MCP_SERVER (the shared
# harness's fake-mcp-server; default /tmp/mcpwall-bench-target/release/fake-mcp-server, which
# tests/benches/instructions.sh builds).
# Environment: SECONDS_EACH (8), SESSIONS (6), IDLE_SESSIONS (100), ROUNDS (3).
set -euo pipefail
cd "$(dirname "$0")/../.."

mcpwall=$(realpath "${1:-target/release/mcpwall}")
seconds=${SECONDS_EACH:-8}
sessions=${SESSIONS:-6}
idle=${IDLE_SESSIONS:-100}
rounds=${ROUNDS:-3}
fake=${FAKE_MCP_SERVER:-/tmp/mcpwall-bench-target/release/fake-mcp-server}
for tool in redis-server redis-cli haproxy wrk python3; do
    command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install redis-server haproxy wrk)" >&2; exit 2; }
done
[ -x "$fake" ] || { echo "needs FAKE_MCP_SERVER (run tests/benches/instructions.sh once, or build ../shared/bench)" >&2; exit 2; }

# shellcheck source=tests/benches/gateway_lib.sh
source tests/benches/gateway_lib.sh
# CPU time (user + system) of one process, all its threads, in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }


redis_commands() {
    redis-cli -p "$1" info commandstats | tr -d '\r' |
        awk -F'[=,:]' '/^cmdstat_/ && $1 !~ /cmdstat_(info|config|flushall)$/ {n += $3} END {print n + 0}'
}

# One run: REPLICAS replicas (SHARED=1: sharing Redis), HAProxy in front; prints
# "requests/s p50-ms replica-µs haproxy-µs redis-µs redis-commands-per-request".
run() {
    local replicas=$1 shared=$2 redis_port redis_pid lb ports=() rpids=() names=(a b c)
    # This runs in a subshell: its own processes end with it, whatever ends it.
    trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
    redis_port=$(free_port)
    redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no >/dev/null &
    redis_pid=$!
    pids+=("$redis_pid")
    wait_port "$redis_port"
    {
        printf 'version: 1\nextends: [default]\nsettings:\n'
        printf '  rate_limit: {max_calls: 1000000, window_seconds: 10}\n'
        printf '  circuit_breaker: {max_violations: 1000000, window_seconds: 10, action: suspend}\n'
        printf '  gateway: {max_sessions: 4096, sessions_per_identity: 4096}\n'
        if [ "$shared" = 1 ]; then
            printf '  shared_state: {redis: "redis://127.0.0.1:%s/0", name: capacity}\n' "$redis_port"
        fi
    } >"$work/policy.yml"
    for i in $(seq 0 $(( replicas - 1 ))); do
        local port
        port=$(free_port)
        mkdir -p "$work/home-${names[$i]}"
        HOME=$work/home-${names[$i]} "$mcpwall" serve --replica "${names[$i]}" \
            --listen "127.0.0.1:$port" -c "$work/policy.yml" -- "$fake" 2>"$work/replica-${names[$i]}.log" &
        rpids+=($!)
        pids+=($!)
        ports+=("$port")
        wait_port "$port"
    done
    lb=$(free_port)
    MCPWALL_LB_LISTEN=127.0.0.1:$lb \
        MCPWALL_REPLICA_A=127.0.0.1:${ports[0]} \
        MCPWALL_REPLICA_B=127.0.0.1:${ports[1]:-${ports[0]}} \
        MCPWALL_REPLICA_C=127.0.0.1:${ports[2]:-${ports[0]}} \
        haproxy -db -f docs/fleet/haproxy.cfg >"$work/haproxy.log" 2>&1 &
    local lb_pid=$!
    pids+=("$lb_pid")
    wait_port "$lb"
    sleep 1 # the health checks mark the replicas up

    local ids=()
    for _ in $(seq "$sessions"); do ids+=("$(open_session "$lb")"); done
    {
        echo 'local sessions = {'
        for id in "${ids[@]}"; do echo "  \"$id\","; done
        echo '}'
        cat <<'EOF'
local next = 0
function setup(thread)
    next = next + 1
    thread:set("session", sessions[next])
end
local id = 0
function request()
    id = id + 1
    return wrk.format("POST", "/mcp", {
        ["Content-Type"] = "application/json",
        ["Accept"] = "application/json, text/event-stream",
        ["Mcp-Session-Id"] = session,
        ["MCP-Protocol-Version"] = "2025-11-25",
    }, string.format('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README.md"}}}', id))
end
function done(summary, latency, requests)
    io.write(string.format("RESULT %.1f %.3f %d %d\n", summary.requests / (summary.duration / 1e6),
        latency:percentile(50) / 1000, summary.errors.status,
        summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
EOF
    } >"$work/load.lua"

    local before_r=0 after_r=0 pid before_l before_d cmds_before out
    for pid in "${rpids[@]}"; do before_r=$(( before_r + $(ticks "$pid") )); done
    before_l=$(ticks "$lb_pid")
    before_d=$(ticks "$redis_pid")
    cmds_before=$(redis_commands "$redis_port")
    out=$(wrk -t"$sessions" -c"$sessions" -d"${seconds}s" -s "$work/load.lua" "http://127.0.0.1:$lb/mcp" | grep '^RESULT')
    for pid in "${rpids[@]}"; do after_r=$(( after_r + $(ticks "$pid") )); done
    local after_l after_d cmds_after
    after_l=$(ticks "$lb_pid")
    after_d=$(ticks "$redis_pid")
    cmds_after=$(redis_commands "$redis_port")
    read -r _ rps p50 status_errors socket_errors <<<"$out"
    if [ "$status_errors" != 0 ] || [ "$socket_errors" != 0 ]; then
        echo "$replicas replica(s): $status_errors non-2xx answers, $socket_errors socket errors" >&2
        exit 1
    fi
    # Resident memory per idle session, on the first replica (sessions opened directly).
    local rss_before rss_after
    rss_before=$(rss_kib "${rpids[0]}")
    for _ in $(seq "$idle"); do open_session "${ports[0]}" >/dev/null; done
    sleep 1
    rss_after=$(rss_kib "${rpids[0]}")

    for pid in "${rpids[@]}" "$lb_pid" "$redis_pid"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    pids=()
    awk -v r="$rps" -v p="$p50" -v tr=$(( after_r - before_r )) -v tl=$(( after_l - before_l )) \
        -v td=$(( after_d - before_d )) -v c=$(( cmds_after - cmds_before )) -v s="$seconds" \
        -v hz="$(getconf CLK_TCK)" -v m=$(( rss_after - rss_before )) -v n="$idle" \
        'BEGIN {n_req = r * s; printf "%s %s %.1f %.1f %.1f %.2f %.1f\n", r, p,
            tr / hz * 1e6 / n_req, tl / hz * 1e6 / n_req, td / hz * 1e6 / n_req, c / n_req, m / n}'
}

: >"$work/results"
for round in $(seq "$rounds"); do
    for config in "1 0" "1 1" "3 1"; do
        read -r replicas shared <<<"$config"
        echo "$replicas $shared $(run "$replicas" "$shared")" >>"$work/results"
    done
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
col() { awk -v r="$1" -v s="$2" -v f="$3" '$1==r && $2==s {print $f}' "$work/results" | median; }
echo
echo "$sessions sessions, ${seconds} s each, medians of $rounds rounds, $(nproc) CPUs"
echo
echo "| replicas | shared state | requests/s | p50 | replica CPU/request | HAProxy CPU/request | Redis CPU/request | Redis commands/request | replica RSS per idle session |"
echo "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for config in "1 0" "1 1" "3 1"; do
    read -r replicas shared <<<"$config"
    printf '| %s | %s | %.0f | %.2f ms | %.0f µs | %.0f µs | %.0f µs | %.2f | %.1f KiB |\n' \
        "$replicas" "$([ "$shared" = 1 ] && echo Redis || echo 'none (in memory)')" \
        "$(col "$replicas" "$shared" 3)" "$(col "$replicas" "$shared" 4)" "$(col "$replicas" "$shared" 5)" \
        "$(col "$replicas" "$shared" 6)" "$(col "$replicas" "$shared" 7)" "$(col "$replicas" "$shared" 8)" \
        "$(col "$replicas" "$shared" 9)"
done
