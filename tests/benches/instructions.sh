#!/usr/bin/env bash
# Instructions per unit of work of a proxy binary, counted by callgrind on the shared
# harness's scenarios: what issue 44 and docs/performance.md measure.
#
#   tests/benches/instructions.sh BINARY [OUT_DIR]
#
# Each workload runs twice under callgrind, the second time with more work; the
# difference between the two totals, divided by the extra units, is the cost of one unit
# (start-up and shutdown cancel out). callgrind counts instructions, not seconds, so the
# figures repeat whatever else the machine is doing. Every run starts with an empty HOME,
# holding only `extends: [default]` and `sandbox: off`: the built-in policy applies and
# the audit log is written there. The sandbox is off because valgrind can run neither its
# helper (mcpwall re-executed through /proc/self/exe) nor Landlock's system calls; it
# costs the server's start, not a frame.
#
# OUT_DIR keeps the callgrind files (`WORKLOAD-long.out`), for
# `callgrind_annotate --inclusive=yes OUT_DIR/calls-long.out`. The harness is built from
# ../shared/bench (HARNESS_DIR overrides it) into BENCH_TARGET (default
# /tmp/mcpwall-bench-target).

set -euo pipefail

binary=$(realpath "${1:?usage: instructions.sh BINARY [OUT_DIR]}")
out=${2:-$(mktemp -d)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/../.." && pwd)
harness=${HARNESS_DIR:-$here/../shared/bench}
target=${BENCH_TARGET:-/tmp/mcpwall-bench-target}
cargo build --release --offline --quiet --manifest-path "$harness/Cargo.toml" --target-dir "$target"
bench=$target/release/mcp-bench
server=$target/release/fake-mcp-server

# name | short-run arguments | long-run arguments | units between them | unit
workloads=(
  "roundtrip|--scenario latency --warmup 10 --latency-calls 200|--scenario latency --warmup 10 --latency-calls 2200|2000|round trip"
  "calls|--scenario throughput-calls --calls 2000|--scenario throughput-calls --calls 12000|10000|pipelined call"
  "responses|--scenario throughput-responses --responses 2|--scenario throughput-responses --responses 10|8|MiB of response"
)

# The total instructions of one run (every thread of the proxy; the child server is not
# traced: callgrind follows no exec here).
run() {
  local name=$1 args=$2 file=$3 home
  home=$(mktemp -d)
  mkdir "$home/.mcpwall"
  printf 'version: 1\nextends: [default]\nsandbox: off\n' >"$home/.mcpwall/config.yml"
  # shellcheck disable=SC2086 # the arguments are words
  HOME=$home "$bench" $args --timeout 900 -- \
    valgrind --tool=callgrind --callgrind-out-file="$file" "$binary" -- "$server" >/dev/null
  rm -rf "$home"
  callgrind_annotate "$file" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

printf '%-10s %15s %15s %14s\n' workload short long per-unit
for w in "${workloads[@]}"; do
  IFS='|' read -r name short long units unit <<<"$w"
  a=$(run "$name" "$short" "$out/$name-short.out")
  b=$(run "$name" "$long" "$out/$name-long.out")
  printf '%-10s %15s %15s %14s  instructions per %s\n' "$name" "$a" "$b" "$(((b - a) / units))" "$unit"
done
echo "callgrind files: $out"
