"""The CPU governor: keeps a budgeted node's speed at its calibrated speed while the machine's
speed for sliced work drifts.

A node under an `rpi3b` budget runs about 1 ms in every 12 ms. How much a millisecond gets
done moves on a shared machine (a cloud VM) by 30 % and more, within seconds, with the
neighbours (README, Fidelity; `k8sdds testbed steadiness` measures it). The governor runs the
steadiness probe beside the nodes of each CPU, under the board's calibrated budget, and gives
each node `budget x reference / rate`: more CPU time while the machine runs slices slowly,
less while it runs them fast. `reference` is the probe's rate under the same budget while the
board was calibrated (`Calibration.probe_rate`), so a governed node does the work per second
the calibration found the board does.

It runs as its own process while the testbed is up (`python -m k8sdds.testbed.governor
CONFIG`), started by `Testbed.up` and stopped by `Testbed.down`; on stop it gives each node
its budget back. The probes read their rates to it through pipes and end when it does.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from k8sdds.errors import TestbedError
from k8sdds.testbed import cgroups, steadiness

SMOOTHING = 0.3  # weight of the newest half-second in the rate's moving average (~2 s)
LOW, HIGH = 0.5, 2.0  # the scale's bounds: at most half or twice the budget
SLOTS = 32768  # the probe's working set (as `k8sdds testbed steadiness --slots`)
STARTING = 2  # half-seconds of a probe's start, not used (as steadiness.DROPPED)


@dataclass(frozen=True)
class Governed:
    """A budgeted node: its cgroup, the CPU it is kept on, its budget and its board."""

    node: str
    cgroup: str
    cpu: int
    budget: float
    board: str


@dataclass(frozen=True)
class Probe:
    """A probe: its cgroup (kept on `cpu`, under `budget`, the board's) and the board's
    calibrated rate under that budget."""

    cgroup: str
    cpu: int
    board: str
    budget: float
    reference: float


@dataclass(frozen=True)
class Config:
    probes: tuple[Probe, ...]
    nodes: tuple[Governed, ...]
    log: str  # a line per probe reading: time, cpu, rate, average, scale

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> Config:
        data = json.loads(text)
        return cls(probes=tuple(Probe(**p) for p in data["probes"]),
                   nodes=tuple(Governed(**n) for n in data["nodes"]), log=data["log"])


def step(average: float | None, rate: float, reference: float) -> tuple[float, float]:
    """(the new moving average of the probe's rate, the nodes' scale) after reading `rate`."""
    average = rate if average is None else (1 - SMOOTHING) * average + SMOOTHING * rate
    if average <= 0:
        return average, HIGH
    return average, min(HIGH, max(LOW, reference / average))


def governed_seconds(lines: Sequence[str], now: float) -> float:
    """The budget the governor has given so far, in seconds of scale per probe: its log
    `lines` read as a scale held from each reading to the next (and the last one's up to
    `now`). Cumulative: the difference over a repeat, divided by the repeat's seconds, is
    the scale the repeat ran under, on average (`Backend.usage`)."""
    last: dict[str, tuple[float, float]] = {}  # cpu -> (time, scale) of its last reading
    total = 0.0
    for line in lines:
        parts = line.split()
        if len(parts) != 5:
            continue
        t, cpu, scale = float(parts[0]), parts[1], float(parts[4])
        if cpu in last:
            total += last[cpu][1] * (t - last[cpu][0])
        last[cpu] = (t, scale)
    total += sum(scale * max(0.0, now - t) for t, scale in last.values())
    return total / max(1, len(last))


# ---- the process ------------------------------------------------------------------------

def _start_probe(probe: Probe) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", steadiness.PROBE, str(SLOTS), "1e12",
                             str(steadiness.HALF_SECOND)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    cgroups.join(probe.cgroup, proc.pid)
    proc.stdin.write(b"go\n")
    proc.stdin.flush()
    return proc


def govern(config: Config) -> None:
    """Run the probes and set the nodes' budgets until SIGTERM; then give the budgets back."""
    def stop(*_):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    procs = []
    try:
        procs = [_start_probe(p) for p in config.probes]
        seen = [0] * len(procs)
        average: list[float | None] = [None] * len(procs)
        by_fd = {proc.stdout.fileno(): i for i, proc in enumerate(procs)}
        pending = {fd: b"" for fd in by_fd}
        with open(config.log, "a") as log:
            while by_fd:
                ready, _, _ = select.select(list(by_fd), [], [], 5)
                for fd in ready:
                    i, probe = by_fd[fd], config.probes[by_fd[fd]]
                    chunk = os.read(fd, 4096)
                    if not chunk:  # the probe ended: its CPU's nodes get their budget
                        by_fd.pop(fd)
                        _set(config, probe, 1.0)
                        continue
                    *lines, pending[fd] = (pending[fd] + chunk).split(b"\n")
                    for line in lines:
                        seen[i] += 1
                        if seen[i] <= STARTING:
                            continue
                        average[i], scale = step(average[i], float(line), probe.reference)
                        _set(config, probe, scale)
                        log.write(f"{time.time():.2f} {probe.cpu} {float(line):.0f} "
                                  f"{average[i]:.0f} {scale:.3f}\n")
                    log.flush()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        for probe in config.probes:
            _set(config, probe, 1.0)


def _set(config: Config, probe: Probe, scale: float) -> None:
    for node in config.nodes:
        if node.cpu == probe.cpu and node.board == probe.board:
            try:
                cgroups.limit(node.cgroup, round(node.budget * scale, 4))
            except OSError:
                pass  # the testbed is going down


# ---- its lifecycle (Testbed.up and Testbed.down) ----------------------------------------

def start(config: Config, path: Path, timeout: float = 30.0) -> int:
    """Start the governor of `config` (written to `path`) as a process of its own; its pid,
    once each probe has been read (the first test runs governed)."""
    path.write_text(config.to_json())
    with open(config.log, "a") as log:
        proc = subprocess.Popen([sys.executable, "-m", "k8sdds.testbed.governor", str(path)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=log, start_new_session=True)
    deadline = time.monotonic() + timeout
    while len(readers(Path(config.log))) < len({p.cpu for p in config.probes}):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc.pid)
            tail = Path(config.log).read_text()[-500:].strip()
            raise TestbedError(f"the CPU governor did not start{': ' + tail if tail else ''} "
                               f"(its log: {config.log})")
        time.sleep(0.1)  # a log line has no event to wait on
    return proc.pid


def readers(log: Path) -> set[str]:
    """The CPUs whose probe the governor has read so far."""
    try:
        lines = log.read_text().splitlines()
    except OSError:
        return set()
    return {line.split()[1] for line in lines if len(line.split()) == 5}


def is_governor(pid: int) -> bool:
    """Whether `pid` is a governor (and not a process that took a dead one's pid)."""
    try:
        return b"k8sdds.testbed.governor" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def stop(pid: int, timeout: float = 5.0) -> None:
    """Stop governor `pid` (SIGTERM: it gives the budgets back), SIGKILL after `timeout`."""
    if not is_governor(pid):
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while is_governor(pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # not our child: no wait(); its /proc entry goes when it ends
    try:
        os.killpg(pid, signal.SIGKILL)  # what is left of its group (probes)
    except ProcessLookupError:
        pass


def measure_reference(cgroup: str, seconds: float) -> float:
    """The probe's mean half-second rate in `cgroup` (under the budget it has): the
    governor's reference, measured while a board is calibrated."""
    rates = steadiness.probe(cgroup, seconds, SLOTS)
    if len(rates) < 2:
        raise ValueError("too few probe readings")
    return round(sum(rates) / len(rates), 1)


if __name__ == "__main__":
    govern(Config.from_json(Path(sys.argv[1]).read_text()))
