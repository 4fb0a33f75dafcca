"""Which test runs on which datapath: a schedule's rows, selected (`--fromI..--toI`) and
repeated once per datapath of the run. A row a datapath cannot carry (multicast across nodes
on a routed one, a pod path on the host's network) is not applicable there: left out on that
datapath and said once per reason, or, with `strict`, the whole schedule refused. A row no
datapath of the run can carry is always an error. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from k8sdds import capacity, model
from k8sdds.errors import ScheduleError
from k8sdds.model import Test


@dataclass(frozen=True)
class NotApplicable:
    """A row left out on one datapath, and why (the manifest keeps these)."""

    row: int  # 0-based test row, as --fromI counts
    line: int  # the schedule's line
    datapath: str
    column: str
    value: str
    reason: str  # why the datapath cannot carry it
    fix: str = ""  # what would carry it

    def to_dict(self) -> dict[str, object]:
        return {"row": self.row, "line": self.line, "datapath": self.datapath,
                "column": self.column, "value": self.value, "reason": self.reason}


@dataclass(frozen=True)
class Expansion:
    """The tests to run, numbered from 1 and grouped by datapath, and the rows left out."""

    tests: list[Test]
    not_applicable: list[NotApplicable]


def _where(path: str | Path, line: int, row: int) -> str:
    return f"{path}, line {line} (test row {row})"


def problem(test: Test) -> tuple[str, str, str, str] | None:
    """Why `test`'s datapath cannot carry it: (column, value, reason, fix); None: it can."""
    dp = model.datapath(test.datapath)
    if dp.host_network and test.path not in (None, "node-node"):
        return ("path", test.path, f"datapath {dp.name} has no pods: its only path is "
                "node-node", "use a pod datapath, or path=node-node")
    if test.path in ("node-pod", "pod-node", "node-node"):
        return None  # unicast between a node and a pod: discovery goes by peers
    if test.placement == "same-node" and not dp.multicast_same_node:
        if test.multicast or test.discovery == "multicast":
            column, value = ("multicast", "true") if test.multicast else ("discovery",
                                                                          "multicast")
            return (column, value, "multicast does not reach even a pod on the same node on "
                    "this datapath (dropped, as Cilium drops it without its multicast "
                    "feature)", "use discovery=peers and multicast=false, or another datapath")
        return None
    if test.placement == "same-node" or dp.multicast_across_nodes:
        return None
    if test.multicast:
        return ("multicast", "true", "multicast does not cross nodes on this datapath "
                "(routed L3, as with the real CNI)", "use a datapath that carries it "
                "(host), placement=same-node, or multicast=false")
    if test.discovery == "multicast":
        return ("discovery", "multicast", "multicast discovery does not cross nodes on this "
                "datapath", "use discovery=peers")
    return None


def expand_where_applicable(tests: Sequence[Test], datapath_names: Sequence[str],
                            path: str | Path = "schedule", from_i: int | None = None,
                            to_i: int | None = None, strict: bool = False) -> Expansion:
    """Select rows `from_i..to_i` (0-based, inclusive) and run them once per datapath; a row
    that names its own datapath runs once, on that one. Tests are grouped by datapath (in the
    order given), so each datapath is set up once. A row a datapath cannot carry is left out
    there (with `strict`: a ScheduleError); a row no datapath of the run carries is an error.
    A row whose stream is a share of the path's capacity gets its capacity test before it
    (`capacity.added`)."""
    selected = [t for t in tests
                if (from_i is None or t.row >= from_i) and (to_i is None or t.row <= to_i)]
    if not selected:
        raise ScheduleError(
            f"{path}: no test rows between --fromI {from_i} and --toI {to_i} "
            f"(the schedule has rows 0 to {len(tests) - 1})")
    order = list(dict.fromkeys(list(datapath_names) +
                               [t.datapath for t in selected if t.datapath]))
    out: list[Test] = []
    left: list[NotApplicable] = []
    for dp in order:
        for t in selected:
            if not (t.datapath == dp or (t.datapath is None and dp in datapath_names)):
                continue
            test = replace(t, datapath=dp)
            found = problem(test)
            if found is None:
                out.append(replace(test, number=len(out) + 1))
                continue
            column, value, reason, fix = found
            if strict:
                raise ScheduleError(f"{_where(path, t.line, t.row)}, column '{column}': value "
                                    f"{value!r} on datapath {dp}: {reason}; {fix}")
            left.append(NotApplicable(t.row, t.line, dp, column, value, reason, fix))
    carried = {t.row for t in out}
    for t in selected:
        if t.row not in carried:
            mine = [n for n in left if n.row == t.row]
            said = "; ".join(f"{n.datapath}: {n.reason}" for n in mine)
            raise ScheduleError(
                f"{_where(path, t.line, t.row)}, column '{mine[0].column}': value "
                f"{mine[0].value!r}: no datapath of this run can carry it ({said}); "
                f"{mine[0].fix}")
    return Expansion(capacity.added(out), left)


def expand(tests: Sequence[Test], datapath_names: Sequence[str], path: str | Path = "schedule",
           from_i: int | None = None, to_i: int | None = None) -> list[Test]:
    """The tests of `expand_where_applicable`, strict: a row a datapath cannot carry is an
    error."""
    return expand_where_applicable(tests, datapath_names, path, from_i, to_i, strict=True).tests


def _rows(rows: list[int]) -> str:
    """0-based rows as ranges: `rows 12 to 15`, `row 3`, `rows 1, 4 to 5`."""
    spans: list[list[int]] = []
    for r in sorted(set(rows)):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    text = ", ".join(str(a) if a == b else f"{a} to {b}" for a, b in spans)
    return f"{'row' if len(set(rows)) == 1 else 'rows'} {text}"


def summary(left: Sequence[NotApplicable | dict]) -> list[str]:
    """One line per reason (not per row): `4 rows with multicast=true (rows 12 to 15): not
    applicable on flannel-vxlan, kube-router: multicast does not cross nodes ...`."""
    groups: dict[tuple[str, str, str], dict[str, list[int]]] = {}
    for n in left:
        d = n.to_dict() if isinstance(n, NotApplicable) else n
        by_dp = groups.setdefault((str(d["column"]), str(d["value"]), str(d["reason"])), {})
        by_dp.setdefault(str(d["datapath"]), []).append(int(d["row"]))
    lines = []
    for (column, value, reason), by_dp in groups.items():
        rows = sorted({r for rs in by_dp.values() for r in rs})
        lines.append(f"{len(rows)} {'row' if len(rows) == 1 else 'rows'} with "
                     f"{column}={value} ({_rows(rows)}): not applicable on "
                     f"{', '.join(by_dp)}: {reason}")
    return lines
