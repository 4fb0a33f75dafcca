"""The kernel's share of a message at the board's pace: what each pod path costs here per
message, and the one factor that charges it as the board paid it. Pure.

The model. A message on pod path p costs the publisher W + D(p) of this machine's CPU, where
W is its cost on the host network and D(p) the pod path's extra kernel work: the publisher's
system time per message on the path minus on the host network, measured here (`PathCost`;
its system time, not its user time, which under qemu-user spreads several times as much
and holds no kernel work). On the board the same extra cost `factor` times as much, relative to the
rest of the message (under qemu-user the rest already runs at the board's pace). So the
emulator adds (factor - 1) x D(p) per message on path p, as idle rules each of the path's
packets crosses (k8sdds.testbed.hopcost): rules(p) = (factor - 1) x D(p) / (cost of a rule x
packets charged per message on p).

The fit. On one named cell (flannel-vxlan at 1 KiB, whose published ratio to the host is the
target), the rules on that path are stepped over at least MIN_STEPS values, the host measured
beside every step in every round; the inverse of the throughput ratio is a straight line in
the rules (each rule adds the same CPU to every message of a CPU-bound sender), fitted by least
squares over every round's value, and the rules at which it meets the target read off it.
The residual (RMS of the rounds about the line, in the ratio's inverse) is stored beside it.
The publisher's system time per message against the rules x packets charged gives the cost
of a rule,
and with it the factor. Every other path's rules follow from its own D(p) and packets by the
same rule: rules(p) = rules(cell) x (D(p) / packets(p)) / (D(cell) / packets(cell)).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

MIN_STEPS = 4  # rule counts the fit measures (0 among them)
MIN_ROUNDS = 3  # rounds of each step, the host beside the cell in each


@dataclass(frozen=True)
class PathCost:
    """A pod path's cost per message here, measured without any charge, the host beside it:
    the publisher's CPU per message (µs, mean over rounds) on each, all of it and its system
    time, and the packets the publisher's node charges per message on the path (hopcost's
    count)."""

    datapath: str
    host_us: float
    pod_us: float
    host_system_us: float
    pod_system_us: float
    packets: float  # per message
    rounds: int

    @property
    def extra_us(self) -> float:
        """D(p): the pod path's extra kernel work per message over the host network's."""
        return self.pod_system_us - self.host_system_us


@dataclass(frozen=True)
class Step:
    """One rule count on the fitted cell: each round's ratio of the cell's throughput to the
    host's beside it, and the publisher's system time per message on the cell (µs, mean)."""

    rules: int
    ratios: tuple[float, ...]
    system_us: float


@dataclass(frozen=True)
class Fit:
    """The line 1/ratio = intercept + slope x rules over every step's rounds, the rules at
    which it meets `target`, and what the fit left (residual: RMS about the line)."""

    rules: int
    target: float
    intercept: float
    slope: float
    residual: float
    rule_ns: float  # one rule's cost to one packet (slope of the publisher's system time)
    factor: float  # how many times this machine's cost of the cell's extra the board pays


def _line(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Least squares y = a + b x over `points`: (a, b, RMS residual)."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("the steps need at least two rule counts")
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    a = my - b * mx
    rms = statistics.fmean([(y - a - b * x) ** 2 for x, y in points]) ** 0.5
    return a, b, rms


def fit(steps: list[Step], target: float, cell: PathCost) -> Fit:
    """The rules at which the cell meets `target` (its published ratio to the host), from
    `steps` (at least MIN_STEPS rule counts; rounds as measured); never below 0."""
    if len({s.rules for s in steps}) < MIN_STEPS:
        raise ValueError(f"the fit needs at least {MIN_STEPS} rule counts")
    a, b, rms = _line([(s.rules, 1 / r) for s in steps for r in s.ratios if r > 0])
    rules = 0 if b <= 0 else max(0, round((1 / target - a) / b))
    _, per_rule_us, _ = _line([(s.rules * cell.packets, s.system_us) for s in steps])
    rule_ns = max(per_rule_us * 1000, 0.0)
    extra = cell.extra_us
    factor = 1 + rules * rule_ns / 1000 * cell.packets / extra if extra > 0 else float("nan")
    return Fit(rules=rules, target=round(target, 4), intercept=round(a, 5),
               slope=round(b, 8), residual=round(rms, 5), rule_ns=round(rule_ns, 3),
               factor=round(factor, 3))


def path_rules(paths: dict[str, PathCost], cell: str, cell_rules: int) -> dict[str, int]:
    """Each measured path's rules, by the cell's rule: rules(p) = cell_rules x (D(p) /
    packets(p)) / (D(cell) / packets(cell)); 0 where a path costs no more than the host, or
    charges no packet. The cell keeps its own."""
    ref = paths[cell]
    per_packet = ref.extra_us / ref.packets if ref.packets > 0 else 0.0
    out = {}
    for name, p in paths.items():
        if name == cell:
            out[name] = cell_rules
        elif per_packet <= 0 or p.packets <= 0 or p.extra_us <= 0:
            out[name] = 0
        else:
            out[name] = round(cell_rules * (p.extra_us / p.packets) / per_packet)
    return out


def first_steps(cell: PathCost, target: float, guess_ns: float) -> list[int]:
    """The rule counts the fit measures: none, and once, twice and four times the rules that
    would bring the cell to `target` if a rule cost `guess_ns` (the cell's CPU per message
    to reach: the host's over the target), at least a tenth of the host's message each: a
    span wide enough for the line's slope to stand out of the rounds' spread."""
    need_us = max(cell.host_us / target - cell.pod_us, cell.host_us * 0.1)
    guess = max(8, round(need_us * 1000 / (guess_ns * max(cell.packets, 0.5))))
    return [0, guess, 2 * guess, 4 * guess]
