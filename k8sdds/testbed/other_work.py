"""Other work on this machine while k8sdds measures: the CPU its cores spent beyond what this
process and every process it started and reaped used (the runs a calibration starts, their
engines). A calibration fits a CPU budget to what the machine gives a node; made beside a
test suite it fits the suite's leftovers (a budget of 1.0 CPU, the search's ceiling, was
once stored so and used on the idle machine), so a step that finds the machine busy ends it,
and nothing is kept. The kernel's own work for the calibration's traffic (its NAPI and
softirq threads) counts as other work here: a few hundredths of a core at a Pi's 100
Mbit/s, well under the limit. `snapshot` reads /proc/stat and getrusage; the rest is pure."""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass

LIMIT_CORES = 0.25  # other work above a quarter of one core, on average over a step: busy


@dataclass(frozen=True)
class Snapshot:
    """The machine's and this process tree's CPU so far."""

    busy_s: float  # every CPU's time not idle (/proc/stat: user, nice, system, irq,
    # softirq; not iowait, nor steal, the time the hypervisor took)
    own_s: float  # user + system of this process and its reaped descendants (getrusage)
    at: float  # time.monotonic()


def snapshot() -> Snapshot:
    """Now."""
    with open("/proc/stat") as fh:
        fields = fh.readline().split()  # cpu user nice system idle iowait irq softirq steal
    ticks = sum(int(fields[i]) for i in (1, 2, 3, 6, 7))
    own = sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                               resource.getrusage(resource.RUSAGE_CHILDREN)))
    return Snapshot(ticks / os.sysconf("SC_CLK_TCK"), own, time.monotonic())


def cores(before: Snapshot, after: Snapshot) -> float:
    """The cores other work kept busy between the two snapshots, on average."""
    wall = after.at - before.at
    if wall <= 0:
        return 0.0
    return max(0.0, (after.busy_s - before.busy_s) - (after.own_s - before.own_s)) / wall


def busy(before: Snapshot, after: Snapshot, when: str) -> str | None:
    """Why the machine was too busy between the snapshots (`when`: "as the run began"),
    or None."""
    other = cores(before, after)
    if other <= LIMIT_CORES:
        return None
    return (f"this machine was busy {when}: other work kept {other:.2f} of its "
            f"{os.cpu_count()} cores busy on average over {after.at - before.at:.0f} s (more "
            f"than {LIMIT_CORES:g}; a test suite, a build, another run?)")
