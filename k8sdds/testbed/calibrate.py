"""`k8sdds testbed calibrate`: measure the CPU budget at which an emulated node shows its
board's host figures (see k8sdds.testbed.calibration for the why)."""

from __future__ import annotations

import csv
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from k8sdds.errors import TestbedError, UserError
from k8sdds.parsers.cpu import PER_MESSAGE
from k8sdds.testbed import calibration, hopcost, kernel_pace, other_work
from k8sdds.testbed.calibration import BOARDS, Board, Calibration
from k8sdds.testbed.lock import TestbedLock
from k8sdds.testbed.profiles import ELSEWHERE, GUESS, PROFILES, RELEASE, Profile, resolve
from k8sdds.testbed.spec import check_profile, default_nodes
from k8sdds.testbed.testbed import Testbed

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Settings:
    """How hard to look: each step runs `repeats` tests of `duration` seconds."""

    profile: str = "rpi3b"
    duration: float = 5.0
    repeats: int = 3
    rounds: int = 3  # the ladder's and the check's (calibration.search)
    low: float = 0.01  # CPUs: the search's range
    high: float = 1.0
    testbed: str = "kdcalib"

    @property
    def minutes(self) -> float:
        """About how long it takes: the link-bound rate, about three scout steps, the
        ladder's two budgets in `rounds` (one of them the scout's last step) and the check's
        `rounds`, each `repeats` runs of `duration` and about 2 s of start (a correction
        adds `rounds` more; the Pi's own program under qemu-user starts slower). Measured:
        263 s for rpi3b with the defaults (2026-11-28). A board whose kernel's share is
        fitted adds a run of the host and each of its pod paths, and three of the host and
        the fitted cell (calibrate._fit_kernel), each two steps: rpi3b-armhf, 12 min 20 s
        (2026-12-03)."""
        board = calibration.BOARDS.get(self.profile)
        hop = 2 * (len(board.hop_paths) + 3) if board and board.hop_cell else 0
        return (3 + 3 * self.rounds + hop) * self.repeats * (self.duration + 2) / 60


# a guess of one idle rule's cost to one packet, for the fit's first steps only (about 16 ns
# on this project's 2-core EPYC VM); the fit measures its own (kernel_pace.Fit.rule_ns)
GUESS_RULE_NS = 16.0

# what a run calibrates with when its profile's budget is not this machine's (`k8sdds
# testbed calibrate`'s defaults)
AUTO = Settings()


def not_here(profiles: Iterable[Profile]) -> dict[str, str]:
    """board -> where its budget in use comes from, for each calibrated profile among
    `profiles` (resolved) whose budget is a guess or was made on another machine. Pure."""
    return {p.board: p.cpu_from for p in profiles
            if p.board and p.cpu_origin in (GUESS, RELEASE, ELSEWHERE)}


def calibrate_here(profiles: Iterable[str], say: Callable[[str], None]) -> list[Calibration]:
    """Calibrate on this machine, and keep, the board budget of each of `profiles` (names)
    that is not this machine's (see not_here); what a run does first unless told not to."""
    made = []
    for board, source in not_here(resolve(name) for name in dict.fromkeys(profiles)).items():
        settings = replace(AUTO, profile=board)
        say(f"{board}: the CPU budget in use is not this machine's ({source}); calibrating "
            f"it here first, about {settings.minutes:.0f} min (--no-calibrate runs on it as "
            "it is)")
        started = time.monotonic()
        cal = calibrate(settings, BOARDS[board], say)
        path = calibration.save(cal)
        say(f"{board}: {cal.cpu:g} CPU ({cal.ratio:.2f} of the link-bound rate at 1 KiB), "
            f"kept in {path}, in {time.monotonic() - started:.0f} s")
        made.append(cal)
    return made


def board_of(profile: str, figures: Path | None) -> Board:
    """The board profile `profile` is calibrated against; `figures` (CSV data_len,
    throughput_mbps: a board's measured host throughput) replaces the built-in figures."""
    check_profile(profile, "--profile")
    p = PROFILES[profile]
    if p.cpu is None or p.board is None:
        raise UserError(f"profile {profile} has no CPU budget to calibrate (profiles with "
                        f"one: {', '.join(n for n, q in PROFILES.items() if q.board == n)})")
    if p.board != profile:
        raise UserError(f"profile {profile} takes its CPU budget from {p.board}: calibrate "
                        f"--profile {p.board}")
    if figures is None:
        return BOARDS[p.board]
    return replace(BOARDS[p.board], host_mbps=read_figures(figures),
                   source=f"measured host figures in {figures}")


def read_figures(path: Path) -> dict[int, float]:
    """A board's host throughput by payload, from CSV columns data_len,throughput_mbps;
    every row checked, the payloads 1024 and 16384 required."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    rows = list(csv.DictReader(text.splitlines()))
    out: dict[int, float] = {}
    for line, row in enumerate(rows, start=2):
        for column in ("data_len", "throughput_mbps"):
            if not (row.get(column) or "").strip():
                raise UserError(f"{path}, line {line}: column {column} is missing (columns: "
                                "data_len,throughput_mbps)")
        try:
            size, mbps = int(row["data_len"]), float(row["throughput_mbps"])
        except ValueError:
            raise UserError(f"{path}, line {line}: data_len {row['data_len']!r} must be a "
                            f"whole number of bytes and throughput_mbps "
                            f"{row['throughput_mbps']!r} a number") from None
        if size <= 0 or not mbps > 0:
            raise UserError(f"{path}, line {line}: data_len and throughput_mbps must be "
                            f"above 0 (got {size}, {mbps:g})")
        out[size] = mbps
    for needed in (1024, 16384):
        if needed not in out:
            raise UserError(f"{path}: needs a row for data_len {needed} (the CPU-bound and "
                            "the link-bound payloads)")
    return out


def _run(tb: Testbed, settings: Settings, payload: int, work: Path,
         datapaths: str = "host") -> pd.DataFrame:
    """One `k8sdds run` of a throughput test at `payload` on `datapaths` (comma-separated,
    in rounds), `settings.repeats` repeats; its summary rows. Refused when other work
    shared the machine meanwhile."""
    import pandas as pd

    sch = work / f"{datapaths.replace(',', '+')}-{payload}.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                   f"{payload},false,1,false,0\n")
    threads = tb.kernel_threads()
    before = other_work.snapshot(threads)
    proc = subprocess.run(
        [sys.executable, "-m", "k8sdds", "run", "--sch", str(sch), "--datapath", datapaths,
         "--duration", f"{settings.duration:g}", "--repeats", str(settings.repeats),
         "--testbed", tb.spec.name, "--out", str(work), "--no-plot", "--json"],
        capture_output=True, text=True)
    if proc.returncode != 0:
        raise TestbedError(f"the calibration's run failed: {proc.stderr.strip()[-500:]}")
    busy = other_work.busy(before, other_work.snapshot(threads),
                           f"while the calibration measured {payload} B on {datapaths}")
    if busy:
        raise TestbedError(f"{busy}: a calibration made so is not kept; calibrate again when "
                           "the machine is idle")
    run_dir = Path(json.loads(proc.stdout)["run_dir"])
    rows = pd.read_csv(run_dir / "results.csv")
    return rows[rows.kind == "summary"]


def _values(rows: pd.DataFrame, metric: str, role: str, datapath: str) -> list[float]:
    """`metric` of `role` on `datapath`, one value a repeat, in repeat order."""
    got = rows[(rows.metric == metric) & (rows.role == role) & (rows.datapath == datapath)]
    return [float(v) for v in got.sort_values("repeat").value]


def _host_mbps(tb: Testbed, settings: Settings, payload: int, work: Path) -> float:
    """Median over repeats of throughput between two nodes (Mbit/s), on the host network."""
    values = _values(_run(tb, settings, payload, work), "throughput_mbps", "sub0", "host")
    if not values:
        raise TestbedError("the calibration's run measured no throughput")
    return statistics.median(values)


@dataclass(frozen=True)
class Beside:
    """A pod path measured with the host beside it in rounds: each round's throughput ratio
    of the path to the host; the publisher's CPU per message (µs, means over rounds), all of
    it and its system time, on each; the packets its node charged per message on the path."""

    ratios: list[float]
    host_us: float
    pod_us: float
    host_system_us: float
    pod_system_us: float
    packets: float


def _beside_host(tb: Testbed, settings: Settings, payload: int, work: Path,
                 datapath: str) -> Beside:
    """One run of the host and `datapath` in rounds (`settings.repeats`)."""
    pub_node = tb.workers()[0]  # the runner places the pub on the first worker
    before = hopcost.crossings(pub_node.ns)
    rows = _run(tb, settings, payload, work, f"host,{datapath}")
    charged = hopcost.crossings(pub_node.ns) - before
    placed = set(rows[rows.role == "pub"].node)
    if placed and placed != {pub_node.name}:
        raise TestbedError(f"the publisher ran on {', '.join(sorted(placed))}, not "
                           f"{pub_node.name}: its node's count is not the publisher's")
    host = _values(rows, "throughput_mbps", "sub0", "host")
    pod = _values(rows, "throughput_mbps", "sub0", datapath)
    if not host or len(host) != len(pod):
        raise TestbedError(f"the calibration's run of host and {datapath} measured "
                           f"{len(host)} and {len(pod)} repeats")

    def per_message(path: str, metric: str) -> float:
        received = _values(rows, "received", "sub0", path)
        seconds = _values(rows, metric, "pub", path)
        if len(seconds) != len(received) or not all(received):
            raise TestbedError(f"the calibration's run of {path} has no CPU per message")
        return statistics.fmean(s / n * 1e6 for s, n in zip(seconds, received, strict=True))

    return Beside([p / h for p, h in zip(pod, host, strict=True)],
                  statistics.fmean(_values(rows, PER_MESSAGE, "pub", "host")),
                  statistics.fmean(_values(rows, PER_MESSAGE, "pub", datapath)),
                  per_message("host", "cpu_system_s"), per_message(datapath, "cpu_system_s"),
                  charged / sum(_values(rows, "received", "sub0", datapath)))


def calibrate(settings: Settings, board: Board,
              say: Callable[[str], None] = lambda _: None) -> Calibration:
    """Bring up a two-worker testbed of `settings.profile`, measure, take it down."""
    tb = Testbed(default_nodes(3, settings.profile, settings.testbed))
    lock = TestbedLock(tb.spec.name)
    lock.acquire()  # held while the testbed comes up; each measuring run takes it in turn
    try:
        if tb.is_up():
            raise UserError(f"testbed {tb.spec.name} is up: calibration needs its own; "
                            f"`k8sdds testbed down --testbed {tb.spec.name}` or another name")
        tb.up()
    finally:
        lock.release()
    try:
        budgeted = [n for n in tb.workers() if tb.cgroup(n)]

        def set_budget(cpus: float | None) -> None:  # and the link bucket that budget needs
            for node in budgeted:
                tb.set_budget(node, cpus)

        with tempfile.TemporaryDirectory(prefix="k8sdds-calibrate-") as tmp:
            work = Path(tmp)
            set_budget(None)
            link = _host_mbps(tb, settings, board.link_payload, work)
            say(f"link-bound: {board.link_payload} B at {link:.1f} Mbit/s with no CPU limit")
            target = board.target_ratio() * link
            say(f"target: {board.payload} B at {target:.1f} Mbit/s "
                f"({board.target_ratio():.3f} of it, as the {board.name})")

            def measure(cpus: float) -> float:
                set_budget(cpus)
                mbps = _host_mbps(tb, settings, board.payload, work)
                say(f"{cpus:.4f} CPU: {board.payload} B at {mbps:.1f} Mbit/s")
                return mbps

            found = calibration.search(measure, target, link, max(settings.low, board.low),
                                       settings.high,
                                       settings.rounds)
            for note in found.notes:
                say(note)
            bounded(found.cpu, max(settings.low, board.low), settings.high)
            kernel = _fit_kernel(tb, settings, board, found.cpu, set_budget, work, say)
    finally:
        lock.acquire()
        try:
            tb.down()
        finally:
            lock.release()
    return Calibration(board=settings.profile, cpu=found.cpu,
                       target_ratio=round(board.target_ratio(), 4),
                       ratio=round(found.measured / link, 4), link_mbps=round(link, 2),
                       machine=calibration.this_machine(),
                       when=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                       steps=found.steps, notes=found.notes, **(kernel or {}))


def bounded(cpu: float, low: float, high: float) -> None:
    """Refuse a budget the search found at one of its bounds: there the machine did not
    show the board's figure inside the range (too slow even with `high` CPUs, as beside
    other work, or too fast with `low`), and a bound is no measurement of it."""
    if cpu >= high or cpu <= low:
        bound = "ceiling" if cpu >= high else "floor"
        raise TestbedError(
            f"the budget found, {cpu:g} CPU, is the search's {bound} ({low:g} to {high:g} "
            "CPU): the machine did not show the board's figure inside the range, so no "
            "budget is measured; a calibration made so is not kept (`k8sdds testbed "
            "steadiness` says how steadily this machine runs a budget)")


def _fit_kernel(tb: Testbed, settings: Settings, board: Board, cpu: float,
                set_budget: Callable[[float | None], None], work: Path,
                say: Callable[[str], None]) -> dict | None:
    """At the budget found, each of the board's pod paths' extra CPU per message (the host
    beside it), then the rules on the board's `hop_cell` at which it shows its published
    ratio to the host (kernel_pace.fit); what the calibration keeps of it (None: the board
    has no such knob)."""
    if not board.hop_cell:
        return None
    set_budget(cpu)
    paths = dict.fromkeys(board.hop_paths, 0)
    for node in tb.workers():
        tb.set_hop(node, paths)  # no charge yet: only the packets counted
    target = board.hop_target()
    rounds = max(settings.repeats, kernel_pace.MIN_ROUNDS)
    measured = replace(settings, repeats=rounds)
    costs: dict[str, kernel_pace.PathCost] = {}
    steps: list[kernel_pace.Step] = []
    for path in board.hop_paths:
        got = _beside_host(tb, measured, board.payload, work, path)
        costs[path] = kernel_pace.PathCost(
            path, round(got.host_us, 3), round(got.pod_us, 3), round(got.host_system_us, 3),
            round(got.pod_system_us, 3), round(got.packets, 4), rounds)
        say(f"{path}: publisher {got.pod_us:.2f} µs a message against the host's "
            f"{got.host_us:.2f}, of it system {got.pod_system_us:.2f} against "
            f"{got.host_system_us:.2f} (+{costs[path].extra_us:.2f}); {got.packets:.2f} "
            f"packets charged a message; {statistics.median(got.ratios):.3f} of host")
        if path == board.hop_cell:
            steps.append(kernel_pace.Step(0, tuple(round(r, 4) for r in got.ratios),
                                          round(got.pod_system_us, 3)))
    cell = costs[board.hop_cell]
    for rules in kernel_pace.first_steps(cell, target, GUESS_RULE_NS)[1:]:
        for node in tb.workers():
            tb.set_hop(node, {**paths, board.hop_cell: rules})
        got = _beside_host(tb, measured, board.payload, work, board.hop_cell)
        steps.append(kernel_pace.Step(rules, tuple(round(r, 4) for r in got.ratios),
                                      round(got.pod_system_us, 3)))
        each = ", ".join(f"{r:.3f}" for r in got.ratios)
        say(f"{rules} idle rules a packet: {board.hop_cell} at "
            f"{statistics.median(got.ratios):.3f} of host (rounds {each}), publisher's "
            f"system time {got.pod_system_us:.2f} µs a message")
    fit = kernel_pace.fit(steps, target, cell)
    rules = kernel_pace.path_rules(costs, board.hop_cell, fit.rules)
    say(f"the kernel's share at the board's pace: x{fit.factor:g} of this machine's extra "
        f"per message ({fit.rule_ns:g} ns a rule a packet); {board.hop_cell} needs "
        f"{fit.rules} rules a packet for {target:.2f} of host (residual {fit.residual:g}); "
        + ", ".join(f"{p} {r}" for p, r in rules.items()))
    return {"hop_cell": board.hop_cell, "hop_target": fit.target,
            "hop_paths": {p: asdict(c) for p, c in costs.items()},
            "hop_steps": [asdict(s) for s in steps], "hop_fit": asdict(fit)}
