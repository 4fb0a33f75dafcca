"""The ground a testbed's parts share: its nodes as laid out from the spec, and what exists
of it as the state file records it (namespaces, pods, budgets, the datapath). The testbed
(k8sdds.testbed.testbed) brings it up and down through its parts (pods, shaping, wiring),
each of which reads and records here; none of them needs the testbed itself."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from k8sdds.errors import UserError
from k8sdds.results import atomic_write
from k8sdds.testbed.netns import ip
from k8sdds.testbed.profiles import PROFILES
from k8sdds.testbed.spec import TestbedSpec

UNDERLAY = "10.99.0"  # node addresses: 10.99.0.<10+n>/24


def state_dir() -> Path:
    return Path(os.environ.get("K8SDDS_STATE_DIR", "/run/k8sdds"))


@dataclass(frozen=True)
class Node:
    name: str
    index: int
    ns: str
    address: str
    pod_cidr: str
    gateway: str
    role: str = "worker"
    arch: str = "amd64"
    profile: str = "cloud"
    mtu: int = 1500  # the node uplink's MTU (from its profile)

    def shrink(self, mtu: int) -> int:
        """An MTU made for a 1500-byte underlay, shrunk to this node's uplink."""
        return mtu - (1500 - self.mtu)


@dataclass
class State:
    spec: dict
    namespaces: list[str] = field(default_factory=list)
    datapath: str | None = None
    wired: bool = True  # the datapath is the testbed's wiring (else a real CNI's)
    pods: dict[str, dict] = field(default_factory=dict)  # pod ns -> Pod fields
    cgroups: dict[str, str] = field(default_factory=dict)  # node -> its budget's cgroup
    accounts: dict[str, str] = field(default_factory=dict)  # node without a budget -> the
    # cgroup that only counts its CPU (a budgeted node is counted in its budget's: `account`)
    not_applied: list[str] = field(default_factory=list)  # profile parts this kernel lacks
    profiles: dict[str, dict] = field(default_factory=dict)  # as applied, CPU resolved
    hops: dict[str, dict] = field(default_factory=dict)  # node -> {pod datapath: idle rules
    # a packet} (k8sdds.testbed.hopcost), applied as the testbed takes that datapath
    owner: str = "user"  # "run" when a run built it (and so takes it down), else "user"

    def account(self, node: str) -> str | None:
        """The cgroup every process of node `node` joins, where its CPU is counted: its
        budget's if it has one, else the one that only counts (None: neither)."""
        return self.cgroups.get(node) or self.accounts.get(node)


class Layout:
    """A testbed's nodes, laid out from its spec, and its state file: what the testbed's
    parts (pods, shaping, wiring) are handed."""

    def __init__(self, spec: TestbedSpec | None = None):
        spec = spec or TestbedSpec()
        check_name(spec.name)
        self.spec = spec
        self.switch = f"{spec.name}-switch"
        self.nodes = [
            Node(name=n.name, index=i, ns=f"{spec.name}-{n.name}",
                 address=f"{UNDERLAY}.{10 + i}", pod_cidr=f"10.244.{i}.0/24",
                 gateway=f"10.244.{i}.1", role=n.role, arch=n.arch, profile=n.profile,
                 mtu=PROFILES[n.profile].mtu or 1500)
            for i, n in enumerate(spec.nodes)
        ]
        self.state_file = state_dir() / f"{spec.name}.json"

    def workers(self) -> list[Node]:
        """The nodes that run pods: the workers (all nodes if there is none)."""
        return [n for n in self.nodes if n.role == "worker"] or list(self.nodes)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def load_state(self) -> State:
        """What exists of this testbed, as its state file records it."""
        try:
            data = json.loads(self.state_file.read_text())
            return State(**data)
        except (OSError, ValueError, TypeError):
            return State(spec=self.spec.to_dict())

    def save_state(self, state: State) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.state_file, json.dumps(asdict(state), indent=2))

    def add_namespace(self, state: State, ns: str) -> None:
        """A namespace, recorded before it is made (a crash after this still removes it)."""
        state.namespaces.append(ns)
        self.save_state(state)  # record first: a crash after this still gets cleaned up
        ip("netns", "add", ns)
        ip("link", "set", "lo", "up", ns=ns)

    def cgroup(self, node: Node) -> str | None:
        """The cgroup every process of `node` (and its pods) must join, if it has a quota."""
        return self.load_state().cgroups.get(node.name)

    def pod_namespace(self, node: Node, pod: str) -> str:
        """The network namespace of pod `pod` on `node`."""
        return f"{self.spec.name}-{node.name}-{pod}"

    def pods_of(self, node: Node, state: State | None = None) -> list[tuple[str, str]]:
        """The pods on `node`, as (name, address)."""
        return pods_on(node, state or self.load_state())


def pods_on(node: Node, state: State) -> list[tuple[str, str]]:
    """The pods on `node` as `state` records them, as (name, address)."""
    return [(p["name"], p["address"]) for p in state.pods.values() if p["node"] == node.name]


def host_veth(pod: str) -> str:
    """The node-side end of a pod's veth (interface names have at most 15 characters)."""
    return f"v{pod}"[:15]


TESTBED_NAME = re.compile(r"^[a-z][a-z0-9-]{0,11}$")


def check_name(name: str) -> None:
    """A testbed name becomes namespace names and a file name: nothing else may pass."""
    if not TESTBED_NAME.match(name):
        raise UserError(f"testbed name {name!r}: 1 to 12 lower-case letters, digits and "
                           "'-', starting with a letter")
