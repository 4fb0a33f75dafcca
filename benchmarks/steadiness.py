#!/usr/bin/env python3
"""How steady this machine runs work under an edge profile's CPU budget (run as root).

An emulated `rpi3b` node runs about 1 ms in every 12.3 ms period and sits idle (or gives its
CPU to others) in between. What it gets done in its 1 ms depends on what its caches kept
over the pause, and on a shared machine (a cloud VM) that varies with the neighbours. This
script measures that with a probe that touches memory the way a network stack does (a
pointer chase over about 1 MB), in a cgroup of its own on one CPU:

1. with no limit: the machine's steadiness for work that runs on;
2. under the profile's budget: the steadiness and the efficiency (work per CPU second,
   against the unlimited run) of the same work in slices.

The CV of the probe's half-second rates under the budget is the floor under the spread of
emulated throughput: `benchmarks/fidelity.py`'s repeats cannot be steadier than the work a
budget buys. Nothing is left behind: the probe's cgroup is removed.

Usage: .venv/bin/python benchmarks/steadiness.py [--profile rpi3b] [--seconds 20]
       [--cpu 1] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from k8sdds.testbed import cgroups
from k8sdds.testbed.profiles import resolve

NAME = "kdsteady"  # the cgroup k8sdds/<NAME>/probe, removed like a testbed's

PROBE = r"""
import random, sys, time
n, seconds = int(sys.argv[1]), float(sys.argv[2])
nxt = list(range(n))
rnd = random.Random(1)
for i in range(n - 1, 0, -1):  # Sattolo: one random cycle through all n slots
    k = rnd.randrange(i)
    nxt[i], nxt[k] = nxt[k], nxt[i]
sys.stdin.readline()  # in the cgroup now
end = time.monotonic() + seconds
mark = time.monotonic() + 0.5
j = done = 0
while True:
    for _ in range(2000):
        j = nxt[j]
    done += 1
    now = time.monotonic()
    if now >= mark:
        print(done, flush=True)
        done = 0
        mark += 0.5
        if now >= end:
            break
"""


def probe(path: str, seconds: float, slots: int) -> list[int]:
    """Half-second work counts of the probe run in cgroup `path` (the first two dropped)."""
    proc = subprocess.Popen([sys.executable, "-c", PROBE, str(slots), str(seconds)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    cgroups.join(path, proc.pid)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    out, _ = proc.communicate()
    return [int(x) for x in out.split()][2:]


def cv(values: list[int]) -> float:
    return 100 * statistics.pstdev(values) / statistics.mean(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="rpi3b")
    ap.add_argument("--seconds", type=float, default=20.0, help="each measurement")
    ap.add_argument("--cpu", type=int, default=1, help="the CPU the probe is kept on")
    ap.add_argument("--rounds", type=int, default=3, help="unlimited/budgeted pairs")
    ap.add_argument("--slots", type=int, default=32768,
                    help="pointer-chase slots (32768: about 1 MB with their objects)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the probe needs a cgroup of its own")
    budget = resolve(args.profile).cpu
    if budget is None:
        sys.exit(f"profile {args.profile} has no CPU budget: nothing to measure")
    path = cgroups.create(["k8sdds", NAME, "probe"], budget, pin=args.cpu)
    print(f"probe: {args.slots} slots, CPU {args.cpu}, budget {budget} CPU "
          f"({args.profile}, periods of {cgroups.period_us(budget) / 1000:g} ms), "
          f"{args.seconds:g} s each; CV of half-second rates")
    try:
        for r in range(1, args.rounds + 1):
            cgroups.limit(path, None)
            free = probe(path, args.seconds, args.slots)
            cgroups.limit(path, budget)
            sliced = probe(path, args.seconds, args.slots)
            eff = statistics.mean(sliced) / (statistics.mean(free) * budget)
            print(f"round {r}: no limit CV {cv(free):4.1f} % | under the budget CV "
                  f"{cv(sliced):4.1f} %, min {min(sliced) / statistics.mean(sliced):.2f} "
                  f"max {max(sliced) / statistics.mean(sliced):.2f} of the mean, "
                  f"efficiency {eff:.2f}", flush=True)
    finally:
        cgroups.remove_testbed(NAME)


if __name__ == "__main__":
    main()
