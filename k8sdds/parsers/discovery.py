"""k8sdds-discovery's output (engines/discovery/discovery.c), and k8sdds-zenoh's in its
discover mode (engines/zenoh/src/discover.rs, the same lines) -> one participant's discovery
time and the traffic on its network interface, during discovery and at steady state. Pure.

What the program prints, one fact a line, times in seconds from its own start (the instant
all participants were to start together, or its own later start): `start iface IFACE late
L epoch E` (how many seconds after that instant it started, and when, on the wall clock);
`participants T SEEN/N` and `matched T READERS/N WRITERS/N` each time a count changes;
`discovered T` once its writer has matched every peer's reader and its reader every peer's
writer; `traffic discovery|steady SECONDS TX_BYTES TX_PACKETS RX_BYTES RX_PACKETS` (its
interface's counters over that span); or `timeout T READERS/N WRITERS/N` when not every
peer was matched in time (Zenoh's: `timeout T SEEN/N`, no readers and writers; nor
`matched` lines). A zenoh-discovery test's router says only its errors (parsers.zenoh).
"""

from __future__ import annotations

import re

import numpy as np

from k8sdds.parsers import zenoh
from k8sdds.parsers.base import Parsed, Trace, Value
from k8sdds.parsers.reader import Parser

START = re.compile(r"^start iface \S+ late (\d+(?:\.\d+)?) epoch (\d+(?:\.\d+)?)$", re.M)
DISCOVERED = re.compile(r"^discovered (\d+(?:\.\d+)?)$", re.M)
PARTICIPANTS = re.compile(r"^participants (\d+(?:\.\d+)?) (\d+)/(\d+)$", re.M)
MATCHED = re.compile(r"^matched (\d+(?:\.\d+)?) (\d+)/(\d+) (\d+)/(\d+)$", re.M)
TRAFFIC = re.compile(r"^traffic (discovery|steady) (\d+(?:\.\d+)?) (\d+) (\d+) (\d+) (\d+)$",
                     re.M)
TIMEOUT = re.compile(r"^timeout (\d+(?:\.\d+)?) (\d+)/(\d+)(?: (\d+)/(\d+))?$", re.M)
ERROR = re.compile(r"^(?:k8sdds-discovery|error): (.+)$", re.M)  # C's, and k8sdds-zenoh's
# the metrics, as results.csv names them (docs/reference/results.md)
TIME = "discovery_s"  # start to every peer's reader and writer matched
SPDP_TIME = "participants_s"  # start to every peer participant seen
LATE = "start_late_s"  # how late it started after the instant all were to start at
# traffic per second on the participant's interface: <phase>_<direction>_<unit>_per_s
DIRECTIONS = ("tx", "rx")
BYTES = "discovery_bytes"  # in and out of its interface from its start to its discovery


def parse(text: str, role: str, latency_test: bool) -> Parsed:
    if role == zenoh.ROUTER:
        return zenoh.parse(text, role, latency_test)
    timeout = TIMEOUT.search(text)
    found = DISCOVERED.search(text)
    if found is None:
        if timeout:
            t, r, n, w, _ = timeout.groups()
            seen = (f"readers {r}/{n}, writers {w}/{n}" if w is not None
                    else f"peers known {r}/{n}")
            return Parsed(failure=f"not every peer matched within {float(t):.1f} s: {seen}")
        error = ERROR.search(text)
        return Parsed(failure=error.group(1).strip() if error else "no `discovered` line")
    values = [Value(TIME, float(found.group(1)), "s")]
    start = START.search(text)
    if start:
        values.append(Value(LATE, float(start.group(1)), "s"))
    everyone = [float(m.group(1)) for m in PARTICIPANTS.finditer(text)
                if int(m.group(2)) >= int(m.group(3))]
    if everyone:
        values.append(Value(SPDP_TIME, everyone[0], "s"))
    for m in TRAFFIC.finditer(text):
        phase, seconds = m.group(1), float(m.group(2))
        if seconds <= 0:
            continue  # matched at its first look: no span to divide by
        tx_b, tx_p, rx_b, rx_p = (int(g) for g in m.groups()[2:])
        for direction, nbytes, packets in (("tx", tx_b, tx_p), ("rx", rx_b, rx_p)):
            values.append(Value(f"{phase}_{direction}_bytes_per_s", nbytes / seconds, "B/s"))
            values.append(Value(f"{phase}_{direction}_packets_per_s", packets / seconds,
                                "packets/s"))
        if phase == "discovery":
            values.append(Value(BYTES, float(tx_b + rx_b), "B"))
    matched = [(float(m.group(1)), min(int(m.group(2)), int(m.group(4))))
               for m in MATCHED.finditer(text)]
    columns = ()
    if matched:
        t, v = zip(*matched, strict=True)
        columns = (Trace("matched_peers", "count", np.array(t), np.array(v, dtype=float)),)
    return Parsed(values=tuple(values), columns=columns)


# what the engine that runs this program reads its logs with
PARSER = Parser("discovery", parse)
