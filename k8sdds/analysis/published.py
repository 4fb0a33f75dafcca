"""The published K8sDDS figures of the Raspberry Pi 3B cluster, cell by cell: subscriber
Mb/s of one transport through one datapath at one payload (throughput tests, one subscriber,
reliable, unicast, no batching) and its ratio to UDP over the host's network at that
payload, the publisher's CPU per message and the round trip's median. Computed from the
study's `Data/` tree by k8sdds' importer (`benchmarks/fidelity.py --tree Data --write-tree` writes
`published.csv`). The one source of these figures: the calibration's host targets, the known
error's published ratios and the fidelity benchmark read it. Pure reading of a file the
package ships."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from k8sdds import model

DATA = Path(__file__).with_name("published.csv")
SOURCE = ("K8sDDS study, Raspberry Pi 3B workers, RTI Perftest, throughput tests, "
          "1 subscriber, reliable")


@dataclass(frozen=True)
class Published:
    transport: str  # "UDP", "TCP", "TLS", "DDS Security/UDP", "DDS Security/TCP"
    datapath: str
    data_len: int
    mbps: float
    ratio: float  # to UDP host at this payload
    pub_us: float | None = None  # the publisher's CPU per message, µs (Perftest's CPU share
    # of the Pi's 4 cores over the subscriber's samples a second); None: not printed
    rtt_p50_us: float | None = None  # the round trip's median in the tree's latency test of
    # this cell, µs (k8sdds' round trip: Perftest's printed one-way figure, doubled)


def _number(text: str | None) -> float | None:
    return float(text) if (text or "").strip() else None


@cache
def cells() -> dict[tuple[str, str, int], Published]:
    """Every published cell by (transport, datapath, data_len)."""
    with DATA.open(newline="") as f:
        rows = [Published(r["transport"], r["datapath"], int(r["data_len"]), float(r["mbps"]),
                          float(r["ratio"]),
                          _number(r.get("pub_us")), _number(r.get("rtt_p50_us")))
                for r in csv.DictReader(f)]
    return {(c.transport, c.datapath, c.data_len): c for c in rows}


def host_mbps(transport: str = "UDP") -> dict[int, float]:
    """The host network's (hostNetwork) Mb/s by payload, as published."""
    return {c.data_len: c.mbps for c in cells().values()
            if c.transport == transport and c.datapath == model.HOST_NETWORK}
