"""The vocabulary as data: tests, command-line defaults, backend limits and datapaths.

It imports only the CNI records (k8sdds/cni: data that imports nothing else of the
package), so every layer above (schedule, engines, backends, runner,
analysis) can use it without a cycle.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from k8sdds import cni
from k8sdds.cni.base import Datapath

TRANSPORTS = ("udp", "tcp", "tls", "dtls")
# cross-node: the publisher on the first worker, the subscribers round-robin over the others;
# same-node: all on one; spread: every role round-robin over all the workers (a discovery
# test's participants, evenly)
PLACEMENTS = ("cross-node", "same-node", "spread")
# the network path between the driver (publisher, client) and the other roles
# pod-service and external-nodeport go through a Service (kube-proxy): kubernetes only
PATHS = ("node-node", "pod-pod-same-node", "pod-pod-cross-node", "node-pod", "pod-node",
         "pod-service", "external-nodeport")
SERVICE_PATHS = ("pod-service", "external-nodeport")
# cds: an RTI Cloud Discovery Service the run deploys as one more role (rtiperftest)
DISCOVERIES = ("multicast", "peers", "cds")
# how messages go from the publisher to the subscribers: directly, or through a broker or
# router the run deploys as one more role (MQTT's broker, Zenoh's router)
TOPOLOGIES = ("peer", "routed")
# the stream beside a round-trip test (`load`): its sender runs on the driver's node (`pub`),
# its receiver on the first peer's (`sub0`), so it crosses the same path, whatever else runs
# between them (a broker, a router, a discovery service)
STREAM, SINK = "stream", "sink"
BESIDE = {STREAM: "pub", SINK: "sub0"}  # role -> the role whose node it shares
# the roles of a node, in an emulated testbed's spec as in a cluster's inventory
NODE_ROLES = ("control-plane", "worker")


@dataclass(frozen=True)
class Test:
    """One row of a schedule: the parameters of one measurement."""

    __test__ = False  # not a pytest test class

    row: int  # 0-based index of the row in the schedule (K8sDDS `I`)
    line: int  # line of the row in the file, for messages
    data_len: int
    multicast: bool
    num_subscribers: int
    best_effort: bool
    batch_size: int
    engine: str = "ddsperf"
    latency_test: bool = False
    transport: str = "udp"
    secure: bool = False
    duration: float = 10.0
    repeats: int = 1
    datapath: str | None = None  # None: the run's --datapath list
    placement: str = "cross-node"
    pub_rate: int = 0  # samples/s; 0: as fast as possible
    send_queue_size: int = 0  # samples; 0: the engine's default
    discovery: str | None = None  # None: chosen from the datapath
    path: str | None = None  # None: from the datapath and placement
    streams: int = 1  # parallel streams (iperf3 -P)
    topology: str = ""  # "": the engine's own (routed for mqtt, peer for the others)
    mqtt_qos: int = -1  # MQTT QoS 0, 1 or 2; -1: from bestEffort (0 if true, else 1)
    # a stream beside a round-trip test, between the same nodes: "N%" of the path's capacity
    # (the same engine's throughput at load_len, measured in the run), "max" (as fast as it
    # goes); "": none
    load: str = ""
    load_len: int = 0  # the stream's sample size in bytes; 0: no stream
    no_print: bool = False
    number: int = 0  # 1-based position in the run (after expansion over datapaths)

    def params(self) -> dict[str, Any]:
        """The measured parameters, as the snake_case columns of results.csv (the path is
        added by whoever knows the datapath: `effective_path`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("row", "line", "number", "no_print", "path")}

    @property
    def load_share(self) -> float | None:
        """The stream's rate as a share of the path's capacity (0.75 for "75%"); None for
        "max" and for no stream."""
        return float(self.load[:-1]) / 100 if self.load.endswith("%") else None

    @property
    def effective_path(self) -> str:
        """The path the traffic takes: the row's own, else node-node on a host-network
        datapath, else pod to pod on the same or another node."""
        if self.path:
            return self.path
        if self.datapath and datapath(self.datapath).host_network:
            return "node-node"
        return "pod-pod-same-node" if self.placement == "same-node" else "pod-pod-cross-node"


@dataclass(frozen=True)
class Defaults:
    """Command-line values for optional columns; None leaves the column's own default."""

    engine: str | None = None
    latency_test: bool | None = None
    transport: str | None = None
    secure: bool | None = None
    duration: float | None = None
    repeats: int | None = None
    placement: str | None = None
    send_queue_size: int | None = None
    discovery: str | None = None
    no_print: bool | None = None


# the architecture names users give (the inventory's, Kubernetes' kubernetes.io/arch, OCI's)
# -> Debian's, which engine builds and images are made for
DEBIAN_ARCH = {"amd64": "amd64", "arm64": "arm64", "arm": "armhf"}
# this machine's, in Debian's names
HOST_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "armhf"}.get(
    platform.machine(), platform.machine())


@dataclass(frozen=True)
class Limits:
    """What the backend can place; checked at load time."""

    max_subscribers: int = 64
    paths: Sequence[str] = tuple(p for p in PATHS if p not in SERVICE_PATHS)
    # node -> Debian architecture, of the nodes a role may land on where the engine runs
    # there (pods, bare hosts); empty where engines run on this machine (emulated)
    arches: Mapping[str, str] = field(default_factory=dict)
    # why multicast cannot be used on this backend's nodes ("": it can): discovery then goes
    # by peers, and multicast=true is refused with this reason
    no_multicast: str = ""
    no_secure: str = ""  # why DDS Security cannot run on this backend's nodes ("": it can)
    # engine -> why its programs are not built for the architecture some nodes run
    unbuilt: Mapping[str, str] = field(default_factory=dict)
    # the CPU budget of each node roles go to, in the order they fill them (the publisher's
    # first; None: no limit), and the CPUs they share (emulated: this machine's); empty: the
    # nodes are machines of their own
    node_cpus: Sequence[float | None] = ()
    machine_cpus: int = 0


# ---- datapaths: how pod traffic crosses the network, whatever backend provides it ----
# a view of the CNI records (k8sdds/cni, one module per CNI)
DATAPATHS: dict[str, Datapath] = cni.DATAPATHS
HOST_NETWORK = cni.host.HOST_NETWORK  # the baseline: processes on the node's own network


def datapath(name: str) -> Datapath:
    """The datapath called `name` (already validated by the caller)."""
    return DATAPATHS[name]
