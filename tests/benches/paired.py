#!/usr/bin/env python3
"""Per-round ratios from the shared harness's raw results.

    python3 tests/benches/paired.py RESULTS.jsonl [BASELINE]

RESULTS.jsonl is what `../shared/bench/compare.sh` wrote (its last line on stderr names
the file; set OUT=DIR to choose where). BASELINE is a target label, `relay` by default.

The harness's tables show each target's median over the rounds, and the ratio of those
medians. On the 2-CPU VMs this project is measured on, the machine's speed drifts within
one run by more than most changes move the figures (relay ran pipelined calls at
139-326 k/s within single runs), so a median of one target and a median of another can
come from rounds of different speed. Here every target is divided by the baseline of the
same round (the harness runs every target once per round, one after the other), and the
median of those ratios is shown with their range: the comparison of each target with the
run next to it. Throughput ratios above 1 are better, latency and start-up ratios below 1.
"""

import json
import statistics
import sys
from collections import defaultdict

# The figure each scenario is compared on.
METRIC = {
    "startup": "startup_p50_ms",
    "latency": "p50_us",
    "throughput-calls": "calls_per_s",
    "throughput-responses": "mb_per_s",
}


def rounds_by_scenario(rows):
    """Group results into rounds: a round ends when a label repeats within a scenario."""
    rounds = defaultdict(list)
    current = defaultdict(dict)
    for row in rows:
        scenario = row["scenario"]
        if row["label"] in current[scenario]:
            rounds[scenario].append(current[scenario])
            current[scenario] = {}
        current[scenario][row["label"]] = row
    for scenario, last in current.items():
        if last:
            rounds[scenario].append(last)
    return rounds


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    baseline = sys.argv[2] if len(sys.argv) == 3 else "relay"
    with open(sys.argv[1]) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for scenario, rounds in rounds_by_scenario(rows).items():
        metric = METRIC.get(scenario)
        if metric is None:
            continue
        labels = []
        for r in rounds:
            labels += [label for label in r if label != baseline and label not in labels]
        print(f"{scenario}: {len(rounds)} rounds, {metric} / {baseline} of the same round")
        for label in labels:
            ratios, cpu = [], []
            for r in rounds:
                t, b = r.get(label), r.get(baseline)
                if not (t and b and t.get("ok") and b.get("ok")) or not b.get(metric):
                    continue
                ratios.append(t[metric] / b[metric])
                if t.get("proxy_cpu_s") is not None:
                    cpu.append(t["proxy_cpu_s"])
            if not ratios:
                print(f"  {label:12} no round where both ran successfully")
                continue
            line = (f"  {label:12} {statistics.median(ratios):.2f}x "
                    f"[{min(ratios):.2f}-{max(ratios):.2f}]")
            if cpu:
                line += f"  proxy CPU median {statistics.median(cpu):.2f} s"
            print(line)


if __name__ == "__main__":
    main()
