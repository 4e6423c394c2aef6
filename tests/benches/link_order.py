#!/usr/bin/env python3
"""Regenerate src/link_order.txt: the symbols of the release binary in the order the
linker should lay them out (see `link_order` in build.rs).

    python3 tests/benches/link_order.py HARNESS_BIN_DIR [BINARY]

HARNESS_BIN_DIR holds `mcp-bench` and `fake-mcp-server` from the shared benchmark
harness (`cargo build --release` in ../shared/bench). BINARY defaults to
target/release/mcpwall. Needs valgrind (callgrind) and nm.

Each workload runs twice under callgrind with a different amount of work; what a function
costs in the longer run beyond the shorter one is what it costs per frame. The functions
every workload runs come first, then those only some run; within each part, functions with
a per-frame cost first (most costly first), then the rest (start-up: configuration,
compilation). So each workload's code is one dense run at the front of the text, which is
what keeps it resident (see `main`). Symbol names
carry a hash of their crate's version and build settings: rerun this after updating
dependencies or the compiler. A stale list only loses the layout, never breaks a build.
"""

import os
import re
import subprocess
import sys
import tempfile

# (name, mcp-bench arguments for the short run, for the long run, units between them)
WORKLOADS = [
    ("round trips", ["--scenario", "latency", "--warmup", "10", "--latency-calls", "200"],
     ["--scenario", "latency", "--warmup", "10", "--latency-calls", "2200"], 2000),
    ("pipelined calls", ["--scenario", "throughput-calls", "--calls", "2000"],
     ["--scenario", "throughput-calls", "--calls", "12000"], 10000),
    ("large responses", ["--scenario", "throughput-responses", "--responses", "2"],
     ["--scenario", "throughput-responses", "--responses", "10"], 8),
]

# `COST (PERCENT)  FILE:FUNCTION [OBJECT]`; callgrind_annotate names the object only on
# some of a function's lines (one per source file its code came from), and marks recursive
# calls with `'DEPTH`. Functions of other objects (libc) are dropped later: the binary does
# not define them.
# Code that runs natively in place of what callgrind saw: valgrind lacks these CPU
# instructions, so under it the portable version ran (demangled name prefixes, without the
# hash: the portable function → the one the CPU runs).
NATIVE_VARIANTS = {
    "sha2::sha256::compress256": "sha2::sha256::x86_sha::compress",
}

COST_LINE = re.compile(r"\s*([\d,]+) \([ \d.]+%\)\s+\S*?:(\S+?)('\d+)?( \[.*\])?$")


def profile(harness, binary, args, work, out):
    # A new, empty home for each run, as a first run on a machine has: creating
    # ~/.mcpwall is start-up code too.
    home = tempfile.mkdtemp(dir=work)
    cmd = [os.path.join(harness, "mcp-bench"), *args, "--timeout", "900", "--",
           "valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}", binary, "--",
           os.path.join(harness, "fake-mcp-server")]
    env = dict(os.environ, HOME=home)
    run = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"link_order: {' '.join(args)} failed:\n{run.stdout}{run.stderr}")
    annotated = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--auto=no", out],
        capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in annotated.splitlines():
        m = COST_LINE.match(line)
        if m:
            function = m.group(2)
            costs[function] = costs.get(function, 0) + int(m.group(1).replace(",", ""))
    return costs


def defined_symbols(binary):
    """The binary's function symbols, mangled (what callgrind names with --demangle=no),
    each with its demangled name without the hash. (Demangled names are ambiguous: every
    generic copy of a function shares one, and ordering by them put copies no workload
    runs among the ones it does.)"""
    def table(*flags):
        out = subprocess.run(["nm", *flags, binary], capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[1] in "tTwW":
                yield parts[0], parts[2]
    by_address = dict(table("-C"))
    return {sym: re.sub(r"::h[0-9a-f]{16}$", "", by_address.get(addr, sym))
            for addr, sym in table()}


def with_native_variants(executed, symbols):
    """Adds the NATIVE_VARIANTS of executed functions, with their cost."""
    by_name = {}
    for sym, name in symbols.items():
        by_name.setdefault(name, []).append(sym)
    for sym, cost in list(executed.items()):
        native = NATIVE_VARIANTS.get(symbols.get(sym, ""))
        for variant in by_name.get(native, []):
            executed.setdefault(variant, cost)
    return executed


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    harness = sys.argv[1]
    binary = os.path.abspath(sys.argv[2] if len(sys.argv) == 3 else "target/release/mcpwall")
    symbols = defined_symbols(binary)
    per_frame, executed, runs_in = {}, {}, {}
    with tempfile.TemporaryDirectory() as work:
        for label, short, long, units in WORKLOADS:
            print(f"link_order: profiling {label}", file=sys.stderr)
            a = profile(harness, binary, short, work, os.path.join(work, "short.cg"))
            b = profile(harness, binary, long, work, os.path.join(work, "long.cg"))
            extra = {f: (b[f] - a.get(f, 0)) / units for f in b if b[f] > a.get(f, 0)}
            total = sum(extra.values()) or 1.0
            for f, cost in extra.items():
                # Each workload's per-frame total weighs the same.
                per_frame[f] = per_frame.get(f, 0.0) + cost / total
            for f, cost in with_native_variants(b, symbols).items():
                executed[f] = executed.get(f, 0) + cost
                runs_in[f] = runs_in.get(f, 0) + 1
    # The kernel maps code in 64 KiB windows around each page that faults, so what a
    # process keeps resident is every window holding a function it ran. Functions every
    # workload runs come first, so that each workload's code is one dense run instead of
    # being interleaved with code only another workload runs; within each part, per-frame
    # code (most costly first), then start-up code.
    everywhere = len(WORKLOADS)
    order = []
    counts = []
    for common in (True, False):
        part = [f for f in executed if f in symbols and (runs_in[f] == everywhere) == common]
        hot = sorted((f for f in part if f in per_frame), key=lambda f: -per_frame[f])
        warm = sorted((f for f in part if f not in per_frame), key=lambda f: -executed[f])
        order += hot + warm
        counts.append(len(hot))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "src", "link_order.txt"), "w") as f:
        f.write("# Generated by tests/benches/link_order.py; read by build.rs.\n")
        f.write(f"# {len(order)} symbols: those every workload runs ({counts[0]} per frame first),"
                f" then the rest ({counts[1]} per frame first).\n")
        f.write("\n".join(order) + "\n")
    print(f"link_order: {len(order)} symbols", file=sys.stderr)


if __name__ == "__main__":
    main()
