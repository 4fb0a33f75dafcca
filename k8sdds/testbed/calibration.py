"""An edge board's CPU budget, derived from a measurement instead of guessed.

A board's published **host** (hostNetwork) figures say how fast its CPU lets pub/sub traffic
go where the link does not bind: on the K8sDDS study's Raspberry Pi 3B, 1 KiB samples reach
82.4 Mbit/s while 16 KiB samples fill the 100 Mbit/s link (94.5; the published cells of
`analysis/published.csv`, the one source of them). Calibration searches the
CPU budget (a fraction of one of this machine's CPUs) at which the emulated node, running
ddsperf on its own network, shows the same ratio of 1 KiB to link-bound throughput. Only the
host figures are used: what each CNI costs must come out of the emulation itself.

The result is this machine's: a faster CPU needs a smaller budget. `k8sdds testbed
calibrate` writes it to CALIBRATION_FILE; without one, the budget calibrated on the machine
that made the release (REFERENCE, shipped in the package) is used, and says so.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from k8sdds.analysis import published
from k8sdds.errors import UserError
from k8sdds.results import atomic_write

REFERENCE = Path(__file__).with_name("calibration.json")  # made on the release machine


def calibration_file() -> Path:
    """Where this machine's calibration lives (K8SDDS_CALIBRATION overrides)."""
    return Path(os.environ.get("K8SDDS_CALIBRATION", "/var/lib/k8sdds/calibration.json"))


@dataclass(frozen=True)
class Board:
    """A board's published host-network throughput (Mbit/s by payload in bytes)."""

    name: str
    host_mbps: dict[int, float]
    source: str
    payload: int = 1024  # the CPU-bound payload calibrated on
    link_payload: int = 16384  # the payload at which the link binds

    def target_ratio(self) -> float:
        """Throughput at `payload` as a share of the link-bound throughput."""
        return self.host_mbps[self.payload] / self.host_mbps[self.link_payload]


BOARDS: dict[str, Board] = {
    "rpi3b": Board("Raspberry Pi 3 Model B", published.host_mbps("UDP"),
                   published.SOURCE + ", hostNetwork, UDP"),
}


@dataclass(frozen=True)
class Calibration:
    """A board's CPU budget on one machine, and the measurement it came from."""

    board: str
    cpu: float  # CPUs of this machine
    target_ratio: float
    ratio: float  # what the emulation showed at `cpu`
    link_mbps: float  # emulated host throughput at the link-bound payload
    machine: dict = field(default_factory=dict)
    when: str = ""
    steps: list = field(default_factory=list)  # [cpu, Mbit/s] tried, in order (a fitted
    # budget's check last: `ratio` is its Mbit/s over link_mbps)

    def describe(self, reference: bool) -> str:
        where = ("on the release machine" if reference else "on this machine") + \
            f" ({self.machine.get('cpu', '?')}, {self.machine.get('cpus', '?')} CPUs)"
        board = BOARDS.get(self.board)
        return (f"calibrated {where}, {self.when[:10]}: 1 KiB at {self.ratio:.2f} of the "
                f"link-bound rate, as the {board.name if board else self.board}'s host "
                f"figures ({self.target_ratio:.2f}; {board.source if board else 'given'})"
                + ("; run `k8sdds testbed calibrate` for this machine" if reference else ""))


# a calibration holds on a machine whose fingerprint is within this factor of the one it
# was made on: on one 2-core VM, 0.3 s measurements in separate processes spread by 1.76
# times (277,000 to 488,000 a second) and the best of short bursts by 1.6; two VMs of one CPU
# model differed by 2.3 times in the budget they needed (docs/explanation/fidelity.md)
FINGERPRINT_FACTOR = 2.0


def fingerprint(bursts: int = 10, seconds: float = 0.03) -> int:
    """1 KiB UDP datagrams this machine sends and receives over loopback in a second of one
    process's CPU time (user and system: a busy machine that takes the CPU away from it
    leaves it alike), the best of short bursts (a burst the hypervisor stole from reads
    low): the per-packet kernel work a CPU budget is calibrated on, measured in a moment.
    Machines that report the same CPU model can differ in it by twice."""
    import socket
    import time

    payload = bytes(1024)
    best = 0.0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        rx.bind(("127.0.0.1", 0))
        to = rx.getsockname()
        for _ in range(bursts):
            count, start = 0, time.process_time()
            while (elapsed := time.process_time() - start) < seconds:
                for _ in range(50):
                    tx.sendto(payload, to)
                    rx.recv(2048)
                count += 50
            best = max(best, count / elapsed)
    return round(best)


@functools.cache
def machine() -> dict:
    """What a calibration holds for: CPU model and count, kernel (as a run's manifest has
    them), and the measured fingerprint (measured once a process)."""
    from k8sdds.environment import capture

    env = capture()
    return {"cpu": env["cpu_model"], "cpus": env["cpu_count"], "kernel": env["kernel"],
            "udp_loopback_pps": fingerprint()}


def elsewhere(made: dict, here: dict) -> str | None:
    """Why a calibration made on the machine `made` describes does not hold on `here` (both
    as machine() gives them), or None where it holds. Pure."""
    why = [f"{what} {made.get(key)!r} there, {here.get(key)!r} here"
           for key, what in (("cpu", "CPU"), ("cpus", "CPUs"), ("kernel", "kernel"))
           if made.get(key) != here.get(key)]
    there, now = made.get("udp_loopback_pps"), here.get("udp_loopback_pps")
    if not there:
        why.append("no fingerprint measured there (a calibration older than k8sdds' "
                   "fingerprint)")
    elif now and not 1 / FINGERPRINT_FACTOR <= now / there <= FINGERPRINT_FACTOR:
        why.append(f"{there} loopback datagrams a second there, {now} here")
    return "; ".join(why) or None


def _read(path: Path) -> dict[str, Calibration]:
    try:
        data = json.loads(path.read_text())
        return {board: Calibration(**c) for board, c in data["boards"].items()}
    except FileNotFoundError:
        return {}
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not a k8sdds calibration file ({exc}); remove it or run "
                        "`k8sdds testbed calibrate` again") from None


def load(board: str) -> tuple[Calibration, bool] | None:
    """(this machine's calibration of `board`, False), else the release machine's (…, True),
    else None."""
    mine = _read(calibration_file()).get(board)
    if mine:
        return mine, False
    shipped = _read(REFERENCE).get(board)
    return (shipped, True) if shipped else None


def save(cal: Calibration, path: Path | None = None) -> Path:
    """Add or replace `cal`'s board in the calibration file (written whole, atomically)."""
    path = path or calibration_file()
    boards = _read(path)
    boards[cal.board] = cal
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"version": 1, "boards": {b: asdict(c) for b, c in
                                                            sorted(boards.items())}},
                                  indent=2) + "\n")
    return path


def fit(trace: list[tuple[float, float]], target: float, ceiling: float) -> float | None:
    """The budget at which the CPU-bound steps of `trace` (under 95 % of `ceiling`, the
    link-bound rate) reach `target`, with throughput taken as proportional to the budget
    (least squares through the origin: no CPU, no traffic). None without such a step. A
    noisy step moves the fitted line less than it moves a bisection."""
    bound = [(c, v) for c, v in trace if v < 0.95 * ceiling]
    if not bound:
        return None
    per_cpu = sum(c * v for c, v in bound) / sum(c * c for c, _ in bound)
    cpus = [c for c, _ in trace]
    return min(max(target / per_cpu, min(cpus)), max(cpus))


def solve(measure: Callable[[float], float], target: float, low: float, high: float,
          steps: int) -> tuple[float, list[tuple[float, float]]]:
    """The budget in [low, high] at which `measure(cpu)` (rising with cpu) meets `target`:
    bisection on a log scale, as budgets span decades. Returns the step closest to the
    target and the trace (see fit() for a smoother answer)."""
    if not 0 < low < high:
        raise ValueError("need 0 < low < high")
    trace: list[tuple[float, float]] = []
    best = (math.inf, math.sqrt(low * high))
    for _ in range(steps):
        cpu = math.sqrt(low * high)
        value = measure(cpu)
        trace.append((cpu, value))
        best = min(best, (abs(value - target), cpu))
        if value < target:
            low = cpu
        else:
            high = cpu
    return best[1], trace
