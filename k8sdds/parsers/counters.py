"""A node's uplink counters, sampled, and read back. `argv(start)` is the sampler: a bash
loop on the node's own network (a namespace of the emulated testbed, a hostNetwork pod)
that prints `T RX_BYTES RX_PACKETS TX_BYTES TX_PACKETS` every 50 ms for the interface of the
default route (else eth0), T the seconds since the wall-clock instant `start`
(RoleContext.start_at), until it is stopped. It starts sampling 200 ms before `start` and
prints the last sample before it as T 0 (nothing of the repeat runs before `start`), so
that a discovery of a few milliseconds has a sample on each side; a sampler that itself
began after `start` has none at 0, and the span is not read. `parse` turns its output into
the four cumulative counters as samples. Pure."""

from __future__ import annotations

import re

import numpy as np

from k8sdds.parsers.base import Parsed, Trace

LINE = re.compile(r"^(\d+\.\d+) (\d+) (\d+) (\d+) (\d+)$", re.M)
METRICS = (("node_rx_bytes", "B"), ("node_rx_packets", "packets"), ("node_tx_bytes", "B"),
           ("node_tx_packets", "packets"))
PREFIX = "counters-"  # the sampler's log: counters-NODE.log in the repeat's folder
ROLE = "node"  # the pseudo role its rows are recorded under (the node column says which)
# bash alone, in microseconds (its own clock, $EPOCHREALTIME; its own reads and printf):
# nothing in the loop buffers a line, and a sample starts no process but `sleep`
SCRIPT = r"""
start=$1
iface=$(while read -r name dest rest; do
  if [ "$dest" = 00000000 ]; then echo "$name"; break; fi; done < /proc/net/route)
d=/sys/class/net/${iface:-eth0}/statistics
wait=$(( start - 200000 - ${EPOCHREALTIME/./} ))
if (( wait > 0 )); then
  sleep "$(printf '%d.%06d' $(( wait / 1000000 )) $(( wait % 1000000 )))"
fi
before=""
while :; do
  read -r rb < "$d/rx_bytes"; read -r rp < "$d/rx_packets"
  read -r tb < "$d/tx_bytes"; read -r tp < "$d/tx_packets"
  t=$(( ${EPOCHREALTIME/./} - start ))
  if (( t < 0 )); then
    before="$rb $rp $tb $tp"
  else
    if [ -n "$before" ]; then printf '0.000000 %s\n' "$before"; before=""; fi
    printf '%d.%06d %s %s %s %s\n' $(( t / 1000000 )) $(( t % 1000000 )) "$rb" "$rp" "$tb" "$tp"
  fi
  sleep 0.05
done
"""


def argv(start: float) -> tuple[str, ...]:
    """The sampler, from the wall-clock instant `start` (seconds since the epoch)."""
    return ("bash", "-c", SCRIPT, "counters", str(round(start * 1e6)))


def parse(text: str, role: str = ROLE, latency_test: bool = False) -> Parsed:
    lines = [tuple(float(g) for g in m.groups()) for m in LINE.finditer(text)]
    if not lines:
        return Parsed(failure="no counter line")
    table = np.array(lines)
    return Parsed(columns=tuple(Trace(metric, unit, table[:, 0], table[:, i + 1])
                                for i, (metric, unit) in enumerate(METRICS)))
