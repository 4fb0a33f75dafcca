"""How steadily this machine runs work under a profile's CPU budget.

An emulated `rpi3b` node runs about 1 ms in every 12.3 ms period and leaves its CPU to
others in between. What it gets done in its millisecond depends on what the caches kept over
the pause, and on a shared machine (a cloud VM) that moves with the neighbours. A probe that
touches memory as a network stack does (a pointer chase over about 1 MB) measures it, in a
cgroup of its own on one CPU, with no limit and under the budget. Its spread under the budget
is the floor under the spread of repeats on budgeted nodes (docs/explanation/fidelity.md).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from k8sdds.errors import TestbedError, UserError
from k8sdds.testbed import cgroups

NAME = "kdsteady"  # the probe's cgroup is k8sdds/<NAME>/probe, removed like a testbed's
HALF_SECOND = 0.5
DROPPED = 2  # the first half-seconds: the probe's start

PROBE = r"""
import random, sys, time
n, seconds, tick = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
nxt = list(range(n))
rnd = random.Random(1)
for i in range(n - 1, 0, -1):  # Sattolo: one random cycle through all n slots
    k = rnd.randrange(i)
    nxt[i], nxt[k] = nxt[k], nxt[i]
sys.stdin.readline()  # moved into the cgroup: go
end = time.monotonic() + seconds
mark = time.monotonic() + tick
j = done = 0
while True:
    for _ in range(2000):
        j = nxt[j]
    done += 1
    now = time.monotonic()
    if now >= mark:
        print(done, flush=True)
        done = 0
        mark += tick
        if now >= end:
            break
"""


@dataclass(frozen=True)
class Round:
    """One round: the probe with no limit, then under the budget."""

    free_cv_pct: float  # CV of the half-second rates with no limit
    budget_cv_pct: float  # ... under the budget
    low: float  # the slowest half-second under the budget, as a share of its mean
    high: float  # the fastest
    efficiency: float  # work per CPU second under the budget, against no limit


@dataclass(frozen=True)
class Steadiness:
    profile: str
    cpu: float  # the budget, in CPUs
    period_ms: float
    pin: int
    seconds: float
    slots: int
    rounds: tuple[Round, ...]


def _cv(values: Sequence[int]) -> float:
    return 100 * statistics.pstdev(values) / statistics.mean(values)


def summarise(free: Sequence[int], sliced: Sequence[int], cpus: float) -> Round:
    """A round from the probe's half-second work counts with no limit and under `cpus`."""
    if len(free) < 2 or len(sliced) < 2 or not min(free) or not statistics.mean(sliced):
        raise TestbedError("the steadiness probe measured too little: use more --seconds")
    mean = statistics.mean(sliced)
    return Round(free_cv_pct=round(_cv(free), 2), budget_cv_pct=round(_cv(sliced), 2),
                 low=round(min(sliced) / mean, 3), high=round(max(sliced) / mean, 3),
                 efficiency=round(mean / (statistics.mean(free) * cpus), 3))


def probe(path: str, seconds: float, slots: int) -> list[int]:
    """The probe's half-second work counts in cgroup `path`, its start dropped."""
    proc = subprocess.Popen([sys.executable, "-c", PROBE, str(slots), str(seconds),
                             str(HALF_SECOND)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        cgroups.join(path, proc.pid)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=seconds * 4 + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise TestbedError(f"the steadiness probe failed (exit {proc.returncode})")
    return [int(x) for x in out.split()][DROPPED:]


def check(profile: str, cpus: float | None, pin: int, seconds: float) -> None:
    """Fail, with what is allowed, before anything is made."""
    if cpus is None:
        raise UserError(f"profile {profile} has no CPU budget: nothing to measure "
                        "(profiles with one: see `k8sdds testbed profiles`)")
    count = os.cpu_count() or 1
    if not 0 <= pin < count:
        raise UserError(f"--cpu {pin}: this machine has CPUs 0 to {count - 1}")
    if seconds < 2:
        raise UserError(f"--seconds {seconds:g}: at least 2 (half-second rates, the first "
                        "second dropped)")
    if os.geteuid() != 0:  # (cgroups.create says when there is no cpu controller)
        raise TestbedError("the steadiness probe needs root (a cgroup of its own); run as "
                           "root")


def measure(profile: str, cpus: float, *, pin: int, seconds: float, rounds: int,
            slots: int, say: Callable[[Round, int], None] | None = None) -> Steadiness:
    """`rounds` rounds of the probe on CPU `pin`; its cgroup is gone afterwards."""
    from k8sdds.testbed.lock import TestbedLock

    lock = TestbedLock(NAME, busy="another `k8sdds testbed steadiness` is running (pid "
                       "{pid}): wait for it (two probes would share the cgroup and the CPU)")
    lock.acquire()
    try:
        path = cgroups.create(["k8sdds", NAME, "probe"], cpus, pin=pin)
        done = []
        try:
            for i in range(1, rounds + 1):
                cgroups.limit(path, None)
                free = probe(path, seconds, slots)
                cgroups.limit(path, cpus)
                sliced = probe(path, seconds, slots)
                done.append(summarise(free, sliced, cpus))
                if say:
                    say(done[-1], i)
        finally:
            cgroups.remove_testbed(NAME)
    finally:
        lock.release()
    return Steadiness(profile=profile, cpu=cpus, period_ms=cgroups.period_us(cpus) / 1000,
                      pin=pin, seconds=seconds, slots=slots, rounds=tuple(done))
