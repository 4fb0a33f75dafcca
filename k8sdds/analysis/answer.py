"""The answer, in a few lines: what each datapath costs against the `host` baseline
(throughput at each payload, p50 and p99 round trip, the subscribers' CPU per gigabit, the
publisher's CPU per message), with
the confidence of each figure and its verdict (`verdict`: better, worse, within noise, or
none with one repeat). Every verdict rests on an interval over repeats, latency as
throughput: a percentile per repeat, Student's t over the repeats. Pure: tables in, rows and
sentences out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import pandas as pd

from k8sdds import model
from k8sdds.analysis import known_error, verdict
from k8sdds.analysis.tables import base, payload
from k8sdds.analysis.verdict import Side
from k8sdds.expansion import summary


@dataclass(frozen=True)
class Cost:
    datapath: str
    metric: str  # a key of METRICS
    data_len: int
    host: float
    value: float
    change_pct: float
    noise: bool | None  # within noise: not shown to be real; None: no verdict (one repeat)
    confidence: str  # what backs the figure ("±4 %, 5 repeats", "1 repeat, no interval")
    repeats: int = 1  # the fewer repeats of the two sides
    known: str = ""  # the emulator's known error at this cell (a calibrated profile's run)

    @property
    def verdict(self) -> str:
        """better, worse, within noise or no verdict (`verdict.word`)."""
        return verdict.word(self.metric, self.change_pct, self.noise)


def costs(thr: pd.DataFrame, lat: pd.DataFrame, cpu: pd.DataFrame | None = None,
          profile: str | None = None, cpus: Sequence[float] = (),
          cpu_message: pd.DataFrame | None = None) -> list[Cost]:
    """Every datapath's change against host on the payload sweep (same other parameters):
    throughput, p50 and p99 round trip, (`cpu`: `tables.cpu_per_gigabit`) the
    subscribers' CPU per gigabit and (`cpu_message`: `tables.cpu_per_message`) the
    publisher's CPU per message. `profile`: the calibrated profile the nodes ran (see
    `calibrated_profile`) at the CPU budgets `cpus`; each throughput figure then carries the
    emulator's known error at its cell, and whether it was measured at another budget."""
    out = _means(thr, "throughput", profile, cpus)
    out += _latency(lat)
    if cpu is not None:
        out += _means(cpu, "cpu")
    if cpu_message is not None:
        out += _means(cpu_message, "cpu_message")
    order = {metric: i for i, metric in enumerate(METRICS)}
    return sorted(out, key=lambda c: (c.datapath, order[c.metric], c.data_len))


def calibrated_profile(manifests: dict[str, dict]) -> str | None:
    """The calibrated profile (one with a board's CPU budget, such as rpi3b) the nodes of
    these runs ran, if they ran one; None for none, or for several."""
    names = set()
    for m in manifests.values():
        cluster = m.get("cluster") or {}
        profiles = cluster.get("profiles") or {}
        names |= {n.get("profile") for n in cluster.get("nodes", [])
                  if (profiles.get(n.get("profile")) or {}).get("board")}
    return names.pop() if len(names) == 1 else None


def budget_notes(manifests: dict[str, dict]) -> list[str]:
    """What the runs' CPU budgets rest on where it is not this machine's calibration of this
    sitting (a guess, another machine's, an old one), as each run recorded it: every figure
    of those nodes rests on it, so the answer says it with them."""
    notes = [n for m in manifests.values() for n in (m.get("cluster") or {}).get(
        "budget_notes", []) if isinstance(n, str)]
    return list(dict.fromkeys(notes))


def not_applicable(manifests: dict[str, dict]) -> list[str]:
    """The rows each run left out on a datapath that cannot carry them, a line per reason
    (an empty cell of the answer is said, never silent)."""
    lines = [line for m in manifests.values()
             for line in summary(m.get("not_applicable") or [])]
    return list(dict.fromkeys(lines))


def middleware_notes(manifests: dict[str, dict]) -> list[str]:
    """What RTI Perftest ran on, where the runs measured with it: its banner names the
    middleware underneath (RTI Connext, or Cyclone DDS in k8sdds' build), and a reader
    comparing with RTI's figures must know which."""
    from k8sdds.engines.rtiperftest import CYCLONE, RtiPerftest

    lines = []
    for m in manifests.values():
        version = (m.get("tools") or {}).get("rtiperftest")
        used = any(t.get("engine") == RtiPerftest.name for t in m.get("tests") or [])
        if used and isinstance(version, str) and version:
            lines.append(f"rtiperftest: {version}" + (
                f": RTI Perftest's program on {CYCLONE}, not on RTI Connext"
                if CYCLONE in version else ""))
    return list(dict.fromkeys(lines))


def _pairs(table: pd.DataFrame):
    """(datapath row, host row) on the payload sweep, each datapath against host's payload."""
    t = base(table) if not table.empty else table
    if t.empty or model.HOST_NETWORK not in set(t["datapath"]):
        return
    host = t[t["datapath"] == model.HOST_NETWORK].set_index("data_len")
    pods = t[t["datapath"] != model.HOST_NETWORK]
    for _, row in pods.sort_values(["datapath", "data_len"]).iterrows():
        if row["data_len"] in host.index:
            yield row, host.loc[row["data_len"]]


def compared(datapath: str, metric: str, data_len: int, value: Side, host: Side,
             enough: bool = True, backing: str = "") -> Cost | None:
    """The change of `value` against `host`: within noise where the 95 % intervals overlap
    (or `enough` is false: too few samples behind a percentile), no verdict with one
    repeat (`verdict.noise`)."""
    if not host.mean or pd.isna(host.mean) or pd.isna(value.mean):
        return None
    noise = verdict.noise(value, host, enough)
    if noise is None:
        conf = f"{min(value.repeats, host.repeats)} repeat, no interval"
    else:
        conf = f"±{value.half_pct or 0.0:.0f} %, {value.repeats} repeats"
    return Cost(datapath, metric, data_len, host.mean, value.mean,
                (value.mean / host.mean - 1) * 100, noise, conf + backing,
                min(value.repeats, host.repeats))


def _means(table: pd.DataFrame, metric: str, profile: str | None = None,
           cpus: Sequence[float] = ()) -> list[Cost]:
    """Changes of a mean over repeats; with `profile`, each with the emulator's known error
    at its cell."""
    out = []
    for row, h in _pairs(table):
        c = compared(row["datapath"], metric, int(row["data_len"]),
                     Side(row["mean"], row["ci_low"], row["ci_high"], int(row["repeats"])),
                     Side(h["mean"], h["ci_low"], h["ci_high"], int(h["repeats"])))
        if c and profile:
            c = replace(c, known=known_error.said(profile, row["transport"],
                                                  bool(row["secure"]), c.datapath, c.data_len,
                                                  cpus))
        out += [c] if c else []
    return out


def _latency(lat: pd.DataFrame) -> list[Cost]:
    """Changes of the p50 and p99 round trip: each repeat's percentile, over repeats."""
    out = []
    for row, h in _pairs(lat):
        for name in ("p50", "p99"):
            def side(r, name=name):
                return Side(r[f"{name}_mean"], r[f"{name}_ci_low"], r[f"{name}_ci_high"],
                            int(r["repeats"]))
            enough = bool(row[f"{name}_enough_each"]) and bool(h[f"{name}_enough_each"])
            fewest = int(min(row["roundtrips_fewest"], h["roundtrips_fewest"]))
            c = compared(row["datapath"], name, int(row["data_len"]), side(row), side(h),
                         enough, f"; ≥ {fewest} round trips a repeat")
            out += [c] if c else []
    return out


def of_runs(runs, thr: pd.DataFrame, lat: pd.DataFrame) -> tuple[list[Cost], list[str]]:
    """The answer of loaded runs (their `tables.throughput` and `tables.latency`): the costs
    against host, and its lines: first, where a change has no interval, how to get one;
    one per datapath, the middlewares side by side, discovery (`discovery.sentences`), the
    round trip under load (`under_load.sentences`), 1 to N subscribers
    (`subscribers.sentences`), what
    the CPU budgets rest on, and what RTI Perftest ran on.
    `k8sdds run` prints the lines; the report opens with them."""
    from k8sdds.analysis import discovery, middlewares, subscribers, tables, under_load

    found = costs(thr, lat, tables.cpu_per_gigabit(runs), calibrated_profile(runs.manifests),
                  budgets(runs.manifests), tables.cpu_per_message(runs))
    side = middlewares.table(thr, lat, middlewares.hubs(runs.manifests))
    body = (sentences(found, order_of(runs.manifests)) + middlewares.sentences(side))
    # each figure said, whether an interval backs it (a middleware line: its fewest repeats)
    backed = [c.noise is not None for c in found]
    backed += list(side["repeats"] >= 2) if not side.empty else []
    unjudged = backed.count(False)
    lines = ([first_line(unjudged, len(backed) - unjudged)] if unjudged and body else []) + body
    lines += discovery.sentences(discovery.table(runs))
    lines += under_load.sentences(under_load.table(runs))
    lines += subscribers.sentences(subscribers.table(runs), [
        na for m in runs.manifests.values() for na in m.get("not_applicable", [])])
    return found, (lines + not_applicable(runs.manifests) + budget_notes(runs.manifests)
                   + (middleware_notes(runs.manifests) if lines else []))


def first_line(unjudged: int, judged: int) -> str:
    """What a reader must know before any figure: which changes get no verdict, and how to
    get one."""
    if not judged:
        return ("one repeat: no change below is called better or worse (no interval); "
                + verdict.HOW)
    return ("some tests have one repeat: their changes below are not called better or worse "
            f"(no interval); {verdict.HOW}")


def order_of(manifests: dict[str, dict]) -> str:
    """The order the runs' repeats ran in (k8sdds.order), as the answer says it."""
    orders = {m.get("order") or "tests" for m in manifests.values()}
    return orders.pop() if len(orders) == 1 else "mixed"


def budgets(manifests: dict[str, dict]) -> list[float]:
    """The calibrated CPU budgets the runs' nodes ran at."""
    return sorted({float(p["cpu"]) for m in manifests.values()
                   for p in ((m.get("cluster") or {}).get("profiles") or {}).values()
                   if p.get("board") and isinstance(p.get("cpu"), (int, float))})


# how each metric reads, in words (whether a rise is better: verdict.rise_is_better)
METRICS = {"throughput": "throughput", "p50": "p50 round trip", "p99": "p99 round trip",
           "cpu": "subscriber CPU per gigabit", "cpu_message": "publisher CPU per message"}
# the order the repeats ran in, as the answer's backing says it
ORDER_WORDS = {"rounds": "in rounds", "tests": "test by test (--order rounds interleaves "
               "them)", "mixed": "in mixed orders"}


def sentences(found: list[Cost], order: str = "rounds") -> list[str]:
    """One line per datapath, read at a glance: for each metric its largest change against
    host (with its verdict where an interval backs it) and, over a sweep, its smallest; then
    what backs the figures ("flannel-vxlan: throughput -45 % at 1 KiB (worse), -3 % at 16
    KiB; p50 round trip +25 % at 256 B (worse); 3 repeats in rounds, 95 % intervals")."""
    lines = []
    for dp in dict.fromkeys(c.datapath for c in found):
        mine = [c for c in found if c.datapath == dp]
        parts = [_phrase(name, [c for c in mine if c.metric == metric])
                 for metric, name in METRICS.items()
                 if any(c.metric == metric for c in mine)]
        known = list(dict.fromkeys(c.known for c in mine if c.known))
        lines.append(f"{dp}: " + "; ".join(parts) + _backing(mine, order)
                     + ("; the emulator here: " + "; ".join(known) if known else ""))
    return lines


def _phrase(name: str, mine: list[Cost]) -> str:
    """'throughput -45 % at 1 KiB (worse), -3 % at 16 KiB', 'p99 round trip within noise',
    or with one repeat 'throughput -45 % at 1 KiB, -3 % at 16 KiB' (no word)."""
    shown = [c for c in mine if not c.noise]  # apart, or without a verdict
    if not shown:
        return f"{name} {verdict.WITHIN}"
    big = max(shown, key=lambda c: abs(c.change_pct))
    text = f"{name} {_signed(big)} at {payload(big.data_len)}"
    if big.noise is False:
        text += f" ({big.verdict})"
    small = min(mine, key=lambda c: 0.0 if c.noise else abs(c.change_pct))
    if small is not big:
        said = verdict.WITHIN if small.noise else _signed(small)
        text += f", {said} at {payload(small.data_len)}"
    return text


def _signed(c: Cost) -> str:
    return f"{c.change_pct:+.0f} %"


def _backing(mine: list[Cost], order: str) -> str:
    """What the changes rest on: repeats, their order and intervals."""
    if not mine:
        return ""
    if all(c.noise is None for c in mine):
        return f"; one repeat: {verdict.NO_VERDICT}"
    repeats = min(c.repeats for c in mine if c.noise is not None)
    some = any(c.noise is None for c in mine)
    return (f"; {repeats} repeats {ORDER_WORDS.get(order, order)}, 95 % intervals"
            + (f" (one repeat elsewhere: {verdict.NO_VERDICT} there)" if some else ""))


UNITS = {"throughput": "Mb/s", "p50": "µs", "p99": "µs", "cpu": "core-seconds per gigabit",
         "cpu_message": "µs"}


def table(found: list[Cost]) -> pd.DataFrame:
    """The answer as a table: one row per datapath, metric and payload, with the verdict
    the lines say."""
    return pd.DataFrame([{
        "datapath": c.datapath, "metric": c.metric, "unit": UNITS[c.metric],
        "payload": payload(c.data_len), "host": c.host, "datapath value": c.value,
        "change %": c.change_pct, "verdict": c.verdict, "confidence": c.confidence,
        **({"the emulator's known error": c.known} if any(x.known for x in found) else {})}
        for c in found])
