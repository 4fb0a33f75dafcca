"""The emulator's known error, cell by cell: where an emulated Pi's throughput ratio stood
against the published Pi's in the last measured sitting, so that an answer on a calibrated
profile says how far to trust the cell it speaks of. Data (`known_error.csv`), not prose.

Each cell: the throughput of one transport through one datapath at one payload as a ratio to
UDP over the host's network at that payload (one subscriber, reliable, unicast, no
batching); `emulated` is the median of 3 rounds of `benchmarks/fidelity.py`, with the CPU
budget `rpi3b` was calibrated to in that sitting and its date (`cpu`, `measured`: a cell
moves with the budget, so the answer says when a run's budget is far from the cell's);
`published` the K8sDDS tree's (`published`); `fitted` marks the cell a profile's calibration
was fitted on (rpi3b-armhf's flannel-vxlan at 1 KiB), which is no evidence of fidelity and
counts in no score. docs/explanation/fidelity.md reads the same cells. Pure."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from k8sdds.analysis import published
from k8sdds.analysis.tables import payload

DATA = Path(__file__).with_name("known_error.csv")
TOLERANCE = 0.10  # the benchmark's: a cell within it follows the published Pi
BUDGET_DRIFT = 0.20  # a run's budget this far from a cell's: the cell may not hold for it


@dataclass(frozen=True)
class Cell:
    profile: str
    transport: str  # "UDP", "TCP", "TLS", "DDS Security/UDP", "DDS Security/TCP"
    datapath: str
    data_len: int
    emulated: float  # ratio to UDP host, this emulator
    published: float  # the same ratio, the published Pi
    cpu: float  # the CPU budget the emulated Pi had when the cell was measured
    measured: str  # the date of that sitting
    fitted: bool = False  # the calibration's own target (its match is by construction)

    @property
    def follows(self) -> bool:
        """Within TOLERANCE of the published Pi."""
        return abs(self.emulated - self.published) <= TOLERANCE


@cache
def cells() -> dict[tuple[str, str, str, int], Cell]:
    """Every measured cell that has a published one, by (profile, transport, datapath,
    data_len)."""
    tree = published.cells()
    with DATA.open(newline="") as f:
        rows = [Cell(r["profile"], r["transport"], r["datapath"], int(r["data_len"]),
                     float(r["emulated"]), tree[key].ratio, float(r["cpu"]), r["measured"],
                     (r.get("fitted") or "").strip().lower() == "true")
                for r in csv.DictReader(f)
                if (key := (r["transport"], r["datapath"], int(r["data_len"]))) in tree]
    return {(c.profile, c.transport, c.datapath, c.data_len): c for c in rows}


def transport_of(transport: str, secure: bool) -> str:
    """The table's name of a protection: 'TLS', 'DDS Security/UDP', ..."""
    name = transport.upper()
    return f"DDS Security/{name}" if secure else name


def profiles() -> set[str]:
    """The profiles the table has cells of."""
    return {key[0] for key in cells()}


def lookup(profile: str, transport: str, secure: bool, datapath: str,
           data_len: int) -> Cell | None:
    return cells().get((profile, transport_of(transport, secure), datapath, data_len))


def said(profile: str, transport: str, secure: bool, datapath: str, data_len: int,
         cpus: Sequence[float] = ()) -> str:
    """In words, for an answer: the emulator against the published Pi at this cell, the
    sitting it was measured in, and whether the run's budgets (`cpus`) are far from that
    sitting's; or that the error here is not known."""
    size = payload(data_len)
    cell = lookup(profile, transport, secure, datapath, data_len)
    if cell is None:
        what = f"{transport_of(transport, secure)} {size}"
        if profile not in profiles():
            return f"{what}: {profile} has no cell measured against a published board"
        return f"{what}: no published Pi cell, the emulator's error here is not known"
    head = (f"{cell.transport} {size}: emulated {cell.emulated:.2f} of UDP host, "
            f"the published Pi {cell.published:.2f} (measured {cell.measured} at "
            f"{cell.cpu:g} CPU)")
    far = [c for c in cpus if abs(c / cell.cpu - 1) > BUDGET_DRIFT]
    verdict = (": the calibration was fitted on this cell, so its match is by construction, "
               "no evidence of fidelity" if cell.fitted else
               "" if cell.follows else ": trust the order, not the size")
    return (head + verdict
            + ("".join(f"; this run's budget {c:g} CPU is {abs(c / cell.cpu - 1) * 100:.0f} "
                       f"% {'below' if c < cell.cpu else 'above'} that sitting's: the cell "
                       "may not hold" for c in far)))
