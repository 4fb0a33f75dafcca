"""The path matrix of `k8sdds baseline`: which tests measure the network itself (and the
pub/sub traffic on the same paths), written as an ordinary schedule so it is validated and
run like any other."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from k8sdds import model
from k8sdds.engines import Engine
from k8sdds.model import PATHS, SERVICE_PATHS, Test

ENGINES = ("ping", "iperf3", "qperf", "ab")
PUBSUB = "ddsperf"  # the pub/sub traffic measured on the same paths (`--dds`)
HEADER = ["engine", "datapath", "path", "transport", "latencyTest", "dataLen", "multicast",
          "numSubscribers", "bestEffort", "batchSize", "streams", "duration"]
DDS_MIN_DURATION = 3.0  # ddsperf spends its first second on discovery
MIN_NODES = 3  # a control plane and two workers, for the cross-node paths


@dataclass(frozen=True)
class Probe:
    """One measurement of the matrix, on every path, and the column of the report's path
    matrix that shows it (analysis.tables.matrix)."""

    engine: str
    transport: str
    latency: bool
    data_len: int
    label: str  # its column: what it shows, in its unit
    metric: str = "throughput_mbps"  # the figure of its rows that column shows
    streams: int = 1
    any_transport: bool = False  # the column takes the engine's rows of every transport
    pubsub: bool = False  # the pub/sub side (PUBSUB's): the report takes its usual sweep point


PROBES = {
    "ping": (Probe("ping", "udp", True, 56, "ping p50 (µs)", "latency_us_p50",
                   any_transport=True),),
    "iperf3": (Probe("iperf3", "tcp", False, 128 * 1024, "iperf3 TCP (Mb/s)"),
               Probe("iperf3", "udp", False, 1024, "iperf3 UDP (Mb/s)")),
    "qperf": (Probe("qperf", "tcp", False, 64 * 1024, "qperf TCP (Mb/s)"),
              Probe("qperf", "tcp", True, 64, "qperf TCP RTT (µs)", "latency_us_mean"),
              Probe("qperf", "udp", True, 64, "qperf UDP RTT (µs)", "latency_us_mean")),
    "ab": (Probe("ab", "tcp", False, 1024, "ab (requests/s)", "requests_per_s", streams=4),),
    # the pub/sub side: the report takes ddsperf's rows of any transport and schedule
    PUBSUB: (Probe(PUBSUB, "udp", False, 1024, "ddsperf (Mb/s)", any_transport=True,
                   pubsub=True),
             Probe(PUBSUB, "udp", True, 64, "ddsperf p50 RTT (µs)", "latency_us_p50",
                   any_transport=True, pubsub=True)),
}


def paths_of(datapath: str, wanted: Sequence[str]) -> list[str]:
    """The paths of `wanted` that exist on `datapath` (a host-network datapath has only
    node-node)."""
    if model.datapath(datapath).host_network:
        return [p for p in wanted if p == "node-node"]
    return [p for p in PATHS if p in wanted]


def schedule(datapath_names: Sequence[str], paths: Sequence[str], engines: Sequence[str],
             registry: Mapping[str, Engine], dds: bool = True, duration: float = 5.0) -> str:
    """The matrix as schedule CSV text: every probe of every engine on every path of every
    datapath (and ddsperf's, with `dds`, for at least DDS_MIN_DURATION seconds)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    chosen = list(engines) + ([PUBSUB] if dds else [])
    for dp in datapath_names:
        for path in paths_of(dp, paths):
            for engine in chosen:
                for p in PROBES[engine]:
                    if path in SERVICE_PATHS and not _through_service(p, registry):
                        continue
                    seconds = max(duration, DDS_MIN_DURATION) if p.pubsub else duration
                    writer.writerow([p.engine, dp, path, p.transport, _b(p.latency),
                                     p.data_len, "false", 1, "false", 0, p.streams,
                                     f"{seconds:g}"])
    return out.getvalue()


def _through_service(p: Probe, registry: Mapping[str, Engine]) -> bool:
    """Whether a Service can carry this probe (its engine dials known ports)."""
    test = Test(data_len=p.data_len, multicast=False, num_subscribers=1, best_effort=False,
                batch_size=0, row=0, line=0, engine=p.engine, transport=p.transport,
                latency_test=p.latency)
    return bool(registry[p.engine].service_ports(test))


def _b(value: bool) -> str:
    return "true" if value else "false"
