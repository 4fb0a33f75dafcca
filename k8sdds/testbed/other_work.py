"""Other work on this machine while k8sdds measures: the CPU its cores spent beyond what this
process and every process it started and reaped used (the runs a calibration starts, their
engines). A calibration fits a CPU budget to what the machine gives a node; made beside a
test suite it fits the suite's leftovers (a budget of 1.0 CPU, the search's ceiling, was
once stored so and used on the idle machine), so a step that finds the machine busy ends it,
and nothing is kept. The kernel threads that do the testbed's own packet work (its threaded
NAPI: the switch ports' and the nodes' uplinks') are the calibration's work, not other work:
their CPU is counted as this tree's. On a slower machine, twice in a row, a calibration on
an otherwise idle machine was refused with 0.28 of a core of other work; beside the next try
these threads took up to 0.16 of a core at the same high budgets (2026-12-03). What the
kernel does for the traffic
outside them (softirq on the way) still counts as other work: a few hundredths of a core.
`snapshot` reads /proc/stat, /proc/PID/stat and getrusage; the rest is pure."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterable
from dataclasses import dataclass

from k8sdds.testbed.netns import cpu_seconds

LIMIT_CORES = 0.25  # other work above a quarter of one core, on average over a step: busy


@dataclass(frozen=True)
class Snapshot:
    """The machine's and this process tree's CPU so far."""

    busy_s: float  # every CPU's time not idle (/proc/stat: user, nice, system, irq,
    # softirq; not iowait, nor steal, the time the hypervisor took)
    own_s: float  # user + system of this process and its reaped descendants (getrusage)
    at: float  # time.monotonic()


def snapshot(threads: Iterable[int] = ()) -> Snapshot:
    """Now; the CPU of `threads` (kernel threads doing this tree's work) counted as own. A
    thread that has ended counts nothing, so its work reads as other work: never less."""
    hz = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as fh:
        fields = fh.readline().split()  # cpu user nice system idle iowait irq softirq steal
    ticks = sum(int(fields[i]) for i in (1, 2, 3, 6, 7))
    own = sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                               resource.getrusage(resource.RUSAGE_CHILDREN)))
    own += sum(cpu_seconds(pid) for pid in threads)
    return Snapshot(ticks / hz, own, time.monotonic())


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
