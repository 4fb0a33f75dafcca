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
    hop_cell: str = ""  # the pod datapath whose published UDP ratio to host at `payload`
    # the kernel's share at the board's pace is fitted on (kernel_pace); "": no such knob
    hop_paths: tuple[str, ...] = ()  # the pod paths whose extra is measured and charged
    low: float = 0.01  # CPUs where the budget's search starts (a board's own programs under
    # qemu-user need a tenth of a CPU to start and discover their peers in time at all)

    def target_ratio(self) -> float:
        """Throughput at `payload` as a share of the link-bound throughput."""
        return self.host_mbps[self.payload] / self.host_mbps[self.link_payload]

    def hop_target(self) -> float:
        """The published ratio of `hop_cell` to the host at `payload`, UDP."""
        return published.cells()[("UDP", self.hop_cell, self.payload)].ratio


# the budgets k8sdds calibrates, by the name a profile's `board` gives: the Pi 3B running
# this machine's programs (its CPU budget alone), and the same board running its own (armhf,
# under qemu-user), whose budget differs because its user space runs as ARM code, and whose
# kernel's share of each pod path is charged at the board's pace, by one factor fitted on one
# named pod cell (flannel-vxlan at 1 KiB)
BOARDS: dict[str, Board] = {
    "rpi3b": Board("Raspberry Pi 3 Model B", published.host_mbps("UDP"),
                   published.SOURCE + ", hostNetwork, UDP"),
    "rpi3b-armhf": Board("Raspberry Pi 3 Model B", published.host_mbps("UDP"),
                         published.SOURCE + ", hostNetwork, UDP; flannel-vxlan for the "
                         "kernel's share", hop_cell="flannel-vxlan",
                         hop_paths=("flannel-hostgw", "kube-router", "flannel-vxlan", "weave",
                                    "weave-encrypted"), low=0.1),
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
    steps: list = field(default_factory=list)  # [cpu, Mbit/s, kind] tried, in order (kind:
    # scout, ladder, check; `ratio` is the kept budget's checks' mean over link_mbps; a file
    # written before the search had [cpu, Mbit/s] only)
    notes: list = field(default_factory=list)  # what the search said of its steps
    hop_cell: str = ""  # the pod datapath the kernel's share was fitted on ("": none)
    hop_target: float = 0.0  # that cell's published ratio to host
    hop_paths: dict = field(default_factory=dict)  # datapath -> kernel_pace.PathCost fields:
    # what each pod path cost here per message, measured without a charge
    hop_steps: list = field(default_factory=list)  # kernel_pace.Step fields, in order
    hop_fit: dict = field(default_factory=dict)  # kernel_pace.Fit fields

    def path_rules(self) -> dict[str, int]:
        """The idle rules a packet each measured pod path is charged (hopcost), derived from
        what was measured: the fit's rules on the cell, the others by its rule."""
        if not self.hop_fit or not self.hop_paths:
            return {}
        from k8sdds.testbed import kernel_pace

        paths = {p: kernel_pace.PathCost(**c) for p, c in self.hop_paths.items()}
        return kernel_pace.path_rules(paths, self.hop_cell, int(self.hop_fit["rules"]))

    def describe(self, reference: bool) -> str:
        where = ("on the release machine" if reference else "on this machine") + \
            f" ({self.machine.get('cpu_model', '?')}, {self.machine.get('cpu_count', '?')} CPUs)"
        board = BOARDS.get(self.board)
        return (f"calibrated {where}, {self.when[:10]}: 1 KiB at {self.ratio:.2f} of the "
                f"link-bound rate, as the {board.name if board else self.board}'s host "
                f"figures ({self.target_ratio:.2f}; {board.source if board else 'given'})"
                + ("; run `k8sdds testbed calibrate` for this machine" if reference else ""))


# a calibration holds on a machine whose loopback rate (loopback_pps) is within this factor
# of the one it
# was made on: on one 2-core VM, 0.3 s measurements in separate processes spread by 1.76
# times (277,000 to 488,000 a second) and the best of short bursts by 1.6; two VMs of one CPU
# model differed by 2.3 times in the budget they needed (docs/explanation/fidelity.md)
LOOPBACK_FACTOR = 2.0


def loopback_pps(bursts: int = 10, seconds: float = 0.03) -> int:
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
def this_machine() -> dict:
    """What a calibration holds for: CPU model and count and kernel, named as a run's
    manifest names them (environment), and the loopback rate (measured once a process)."""
    from k8sdds.environment import capture

    env = capture()
    return {**{key: env[key] for key in MACHINE}, "udp_loopback_pps": loopback_pps()}


# what a calibration's machine must share with this one, as environment.capture names it;
# a file written before 2026-11-29 named the first two `cpu` and `cpus` (read as these)
MACHINE = {"cpu_model": "CPU", "cpu_count": "CPUs", "kernel": "kernel"}
OLD_NAMES = {"cpu": "cpu_model", "cpus": "cpu_count"}
# what a file written before 2026-12-03 kept of the cost per hop (the same rules on every
# hook of every pod path): read as no charge, the board's kernel share not calibrated
OLD_FIELDS = ("hop_rules", "hop_ratio")


# a calibration made on this machine, whose loopback rate now differs from the one it was
# made at by more than this share: the machine runs at another pace than it was calibrated
# at. Measured 2026-12-03 on one 2-core VM: 229,247 a second as rpi3b-armhf was calibrated
# (its host publisher CPU-bound at 37 us a message), 288,000 an hour later (3 readings within
# 1,300), when the same program took 20 us a message and every 1 KiB path reached the link.
PACE_DRIFT = 0.15


def pace(made: dict, here: dict) -> float | None:
    """This machine's loopback rate over the one the calibration was made at (both as
    this_machine() gives them; None: either unmeasured). Pure."""
    there, now = made.get("udp_loopback_pps"), here.get("udp_loopback_pps")
    return now / there if there and now else None


def elsewhere(made: dict, here: dict) -> str | None:
    """Why a calibration made on the machine `made` describes does not hold on `here` (both
    as this_machine() gives them), or None where it holds. Pure."""
    why = [f"{what} {made.get(key)!r} there, {here.get(key)!r} here"
           for key, what in MACHINE.items() if made.get(key) != here.get(key)]
    there, now = made.get("udp_loopback_pps"), here.get("udp_loopback_pps")
    if not there:
        why.append("no loopback rate measured there (a calibration older than k8sdds' "
                   "measure of it)")
    elif now and not 1 / LOOPBACK_FACTOR <= now / there <= LOOPBACK_FACTOR:
        why.append(f"{there} loopback datagrams a second there, {now} here")
    return "; ".join(why) or None


def _read(path: Path) -> dict[str, Calibration]:
    try:
        data = json.loads(path.read_text())
        return {board: Calibration(**{**{k: v for k, v in c.items() if k not in OLD_FIELDS},
                                      "machine": {OLD_NAMES.get(k, k): v for k, v in
                                                  c.get("machine", {}).items()}})
                for board, c in data["boards"].items()}
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


# the search's bounds, as shares of the link-bound rate: the scout stops once 1 KiB reaches
# SCOUT of it; a measurement under CPU_BOUND of it is on the straight part of the curve
# (throughput proportional to the budget: on a 2-core EPYC VM, 0.03 and 0.045 CPU read 940
# and 927 Mbit/s per CPU over three rounds, 0.06 CPU 918, before the bend under the link)
SCOUT = 0.25
CPU_BOUND = 0.75
CLOSE = 0.03  # a check this near the target ratio needs no correction


@dataclass(frozen=True)
class Search:
    """A budget and how it was found: every step as [cpu, Mbit/s, kind] in the order measured
    (kind: scout, ladder, check), and what the search says of them (a step out of order)."""

    cpu: float
    measured: float  # Mbit/s at `cpu`: the mean of its check rounds, never the target
    steps: list
    notes: list


def search(measure: Callable[[float], float], target: float, link: float, low: float = 0.01,
           high: float = 1.0, rounds: int = 3) -> Search:
    """The budget in [low, high] at which `measure(cpu)` (Mbit/s at 1 KiB) meets `target`,
    with the link-bound rate `link`:
    1. scout: from `low`, doubling, until a step reaches SCOUT of the link (a few steps);
    2. ladder: that budget and half again (or half of it, if the scout overshot), each
       measured in `rounds` rounds, the order reversed every other round (a drift of the
       machine meets both alike); their medians must rise with the budget, else the search
       says so; a line through the origin is fitted through every CPU-bound value;
    3. check: the fitted budget measured in `rounds`; where its mean misses the target by
       more than CLOSE of the link, one proportional correction, checked the same way, and
       the closer of the two is kept.
    Monotone by construction: the scout only rises, the ladder is judged on medians, and a
    correction moves the budget towards the target."""
    import statistics

    if not 0 < low < high:
        raise ValueError("need 0 < low < high")
    steps: list = []
    notes: list[str] = []

    def step(cpu: float, kind: str) -> float:
        value = measure(cpu)
        steps.append([cpu, value, kind])
        return value

    cpu = low
    value = step(cpu, "scout")
    while value < SCOUT * link and cpu < high:
        cpu = min(cpu * 2, high)
        value = step(cpu, "scout")
    ladder = [cpu / 2, cpu] if value >= 2 * SCOUT * link and cpu / 2 >= low else \
        [cpu, min(cpu * 1.5, high)]
    values: dict[float, list[float]] = {b: [] for b in ladder}
    values[cpu].append(value)  # the scout's last step is the ladder's first round there
    for r in range(rounds):
        for b in (ladder if r % 2 else ladder[::-1]):
            if len(values[b]) <= r:
                values[b].append(step(b, "ladder"))
    medians = [statistics.median(values[b]) for b in ladder]
    if medians[1] <= medians[0]:
        notes.append(f"the ladder is out of order: {ladder[1]:.4f} CPU read "
                     f"{medians[1]:.1f} Mbit/s, {ladder[0]:.4f} CPU {medians[0]:.1f} (medians "
                     f"of {rounds} rounds): the machine's noise is larger than the step")
    bound = [(b, v) for b in ladder for v in values[b] if v < CPU_BOUND * link]
    if not bound:
        notes.append(f"no CPU-bound value under {CPU_BOUND:g} of the link: the budget is the "
                     "ladder's lower step")
        per_cpu = medians[0] / ladder[0]
    else:
        per_cpu = sum(b * v for b, v in bound) / sum(b * b for b, _ in bound)

    def check(budget: float) -> float:
        return statistics.fmean(step(budget, "check") for _ in range(rounds))

    best = round(min(max(target / per_cpu, low), high), 4)  # the budget as kept, measured
    measured = check(best)
    if abs(measured - target) > CLOSE * link:
        again = round(min(max(best * target / measured, low), high), 4)
        notes.append(f"{best:.4f} CPU read {measured / link:.3f} of the link, not "
                     f"{target / link:.3f}: corrected in proportion to {again:.4f} CPU")
        second = check(again)
        if abs(second - target) < abs(measured - target):
            best, measured = again, second
    return Search(best, measured, [[round(c, 4), round(v, 2), k]
                                             for c, v, k in steps], notes)
