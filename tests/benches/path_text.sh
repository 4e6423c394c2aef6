#!/usr/bin/env bash
# Issue 39's eight adversarial path-like inputs (1 MiB each) judged by `mcpwall check`
# with the built-in pack and an empty HOME: MiB/s (best of N alternated runs, start-up
# included) and, with CALLGRIND=1, callgrind's instruction total per input.
#
#   tests/benches/path_text.sh BEFORE_BINARY AFTER_BINARY [RUNS]
#
# The two binaries are run alternately on each input, so load the machine carries lands
# on both; compare ratios, not absolute figures.

set -euo pipefail

before=$(realpath "${1:?usage: path_text.sh BEFORE AFTER [RUNS]}")
after=$(realpath "${2:?usage: path_text.sh BEFORE AFTER [RUNS]}")
runs=${3:-9}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home"

# name | repeated unit | tool | argument | prefix replacing the first bytes
inputs=(
  "sshx-spaces-content|/home/u/.sshx/id_rsa.pubx/../.envx |write_file|content|"
  "sshx-spaces-command|/home/u/.sshx/id_rsa.pubx/../.envx |run_command|command|"
  "cat-sshx-spaces-command|/home/u/.sshx/id_rsa.pubx/../.envx |run_command|command|cat "
  "abc-command|a/../b/../c |run_command|command|"
  "dotdot-path|/home/u/x/../y|read_file|path|"
  "dotdot-content|/home/u/x/../y|write_file|content|"
  "sshx-path|/home/u/.sshx/id_rsa.pubx/../.envx|read_file|path|"
  "sshx-content|/home/u/.sshx/id_rsa.pubx/../.envx|write_file|content|"
)

for i in "${inputs[@]}"; do
  IFS='|' read -r name unit tool key prefix <<<"$i"
  python3 - "$unit" "$tool" "$key" "$prefix" >"$work/$name.json" <<'PY'
import json, sys
unit, tool, key, prefix = sys.argv[1:]
n = 1 << 20
text = (unit * (n // len(unit) + 1))[:n]
text = prefix + text[len(prefix):]
print(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": tool, "arguments": {key: text}}}))
PY
done

# Seconds one `check` of input $2 by binary $1 takes, start-up included.
seconds() {
  local s e
  s=$(date +%s%N)
  HOME=$work/home "$1" check <"$2" >/dev/null 2>&1 || true
  e=$(date +%s%N)
  echo "($e - $s) / 1000000000" | bc -l
}

printf '%-26s %12s %12s %7s' input before_MiB/s after_MiB/s ratio
[[ ${CALLGRIND:-0} == 1 ]] && printf ' %12s %12s %7s' before_Ir after_Ir ratio
printf '\n'
for i in "${inputs[@]}"; do
  name=${i%%|*}
  f=$work/$name.json
  bb=999; ba=999
  for _ in $(seq "$runs"); do
    t=$(seconds "$before" "$f")
    bb=$(echo "if ($t < $bb) $t else $bb" | bc -l)
    t=$(seconds "$after" "$f")
    ba=$(echo "if ($t < $ba) $t else $ba" | bc -l)
  done
  printf '%-26s %12.1f %12.1f %7.3f' "$name" "$(echo "1/$bb" | bc -l)" "$(echo "1/$ba" | bc -l)" "$(echo "$bb/$ba" | bc -l)"
  if [[ ${CALLGRIND:-0} == 1 ]]; then
    ir() {
      HOME=$work/home valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$1" check <"$f" >/dev/null 2>&1 || true
      callgrind_annotate "$work/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
    }
    a=$(ir "$before"); b=$(ir "$after")
    printf ' %12s %12s %7.3f' "$a" "$b" "$(echo "$b/$a" | bc -l)"
  fi
  printf '\n'
done
