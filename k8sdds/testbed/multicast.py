"""Does multicast cross this datapath? Probed, not read from the CNI record: datagrams sent
to the group and port DDS discovery uses (Cyclone DDS's SPDP for domain 0, at its TTL) from
one node's pod (or the node itself, on the host's network) and listened for in pods on the
other nodes. A receiver counts only datagrams carrying the probe's nonce, so DDS traffic
already on the group is never taken for the probe's.

The probe programs are this module run in the namespaces (`python -m
k8sdds.testbed.multicast recv|send ...`): Python's standard library only.
"""

from __future__ import annotations

import secrets
import select
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

GROUP = "239.255.0.1"  # Cyclone DDS's default SPDP multicast address
PORT = 7400  # SPDP's multicast port for DDS domain 0 (7400 + 250 x domain)
TTL = 32  # Cyclone DDS's MulticastTimeToLive
COUNT = 3  # datagrams sent, 50 ms apart: one lost to a slow start is no verdict
LISTEN = 0.5  # seconds a receiver listens once the sender is done (told on its stdin)
READY = 10.0  # seconds a receiver gets to join the group, and the sender to send
SAME_NODE = "(same node)"  # the control receiver's name


@dataclass(frozen=True)
class MulticastProbe:
    """One probe's outcome: from where, to which nodes, and which heard it."""

    sender: str  # the node that sent
    between: str  # "pods", "nodes", or "nodes and pods" (where the places were)
    arrived: Mapping[str, bool]  # receiving node -> whether a datagram arrived
    group: str = f"{GROUP}:{PORT}"
    # whether it arrived at a second pod beside the sender, on its own node (None: not
    # tried): False where the datapath drops multicast even there (Cilium's)
    control: bool | None = None

    @property
    def crossed(self) -> bool:
        """Multicast reached every other node."""
        return bool(self.arrived) and all(self.arrived.values())

    def said(self) -> str:
        """`arrived at node2, node3 (pods, from node1, 239.255.0.1:7400)`."""
        heard = [n for n, ok in self.arrived.items() if ok]
        missed = [n for n, ok in self.arrived.items() if not ok]
        parts = ([f"arrived at {', '.join(heard)}"] if heard else []) + (
            [f"did not arrive at {', '.join(missed)}"] if missed else [])
        extra = ("" if self.control is None else
                 "; beside the sender: arrived" if self.control else
                 "; not even beside the sender: dropped on its own node")
        return f"{'; '.join(parts)} ({self.between}, from {self.sender}, {self.group}{extra})"

    def reach(self) -> str:
        """How far it reached, in the words `record_says` uses: `yes` (across nodes), `same
        node` (only beside the sender), `no`."""
        if self.crossed:
            return "yes"
        return "same node" if self.control else "no"

    def disagrees(self, dp) -> bool:
        """Whether datapath record `dp` says otherwise (what was not tried aside)."""
        control = self.control if self.control is not None else dp.multicast_same_node
        return (self.crossed != dp.multicast_across_nodes
                or control != dp.multicast_same_node)

    def record(self) -> dict:
        """As a node fingerprint holds it (k8sdds.fingerprint)."""
        return {"from": self.sender, "between": self.between, "group": self.group,
                "arrived": dict(self.arrived),
                **({} if self.control is None else {"same_node": self.control})}


def argv(mode: str, address: str, nonce: str) -> list[str]:
    """The probe program's argv: `recv` or `send`, on the interface holding `address`."""
    return [sys.executable, "-m", "k8sdds.testbed.multicast", mode, address, nonce]


def run(sender: tuple[str, str, str], receivers: Sequence[tuple[str, str, str]],
        exec_argv, between: str, control: tuple[str, str, str] | None = None) -> MulticastProbe:
    """Probe from `sender` to each of `receivers`, each (node, namespace, address), and to
    `control` (a receiver on the sender's own node) where given; `exec_argv(namespace,
    argv)` runs an argv in a namespace (testbed.netns.exec_argv)."""
    if control is not None:
        receivers = [*receivers, (SAME_NODE, control[1], control[2])]
    nonce = secrets.token_hex(8)
    from k8sdds.testbed.netns import package_env

    env = package_env()
    procs = {node: subprocess.Popen(exec_argv(ns, argv("recv", address, nonce)),
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.PIPE, text=True, env=env)
             for node, ns, address in receivers}
    try:
        deadline = time.monotonic() + READY
        for proc in procs.values():  # each says `ready` once it has joined the group
            line = _line(proc, deadline - time.monotonic())
            if line.strip() != "ready":
                raise OSError(f"the multicast probe's receiver did not start: "
                              f"{line.strip() or f'nothing within {READY:g} s'}")
        node, ns, address = sender
        subprocess.run(exec_argv(ns, argv("send", address, nonce)), check=True,
                       capture_output=True, timeout=READY, env=env)
        arrived = {}
        for name, proc in procs.items():  # sent: each listens LISTEN more, then says
            out, _ = proc.communicate("sent\n", timeout=READY + LISTEN)
            arrived[name] = out.strip().startswith("arrived")
        same = arrived.pop(SAME_NODE, None)
        return MulticastProbe(sender=node, between=between, arrived=arrived, control=same)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _line(proc: subprocess.Popen, timeout: float) -> str:
    """A line of `proc`'s output, or "" when none came within `timeout` seconds."""
    if proc.stdout is None:
        return ""
    readable, _, _ = select.select([proc.stdout], [], [], max(0.0, timeout))
    return proc.stdout.readline() if readable else ""


def _receive(address: str, nonce: str) -> int:
    """Join the group on `address`, say `ready`, and listen until the nonce arrives or, once
    told on stdin that the sender is done, LISTEN seconds more."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # beside a DDS on the node
    sock.bind(("", PORT))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                    struct.pack("4s4s", socket.inet_aton(GROUP), socket.inet_aton(address)))
    print("ready", flush=True)
    deadline = time.monotonic() + READY + LISTEN
    waiting = [sock, sys.stdin]
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select(waiting, [], [], left)
        if sys.stdin in readable:  # the sender is done (or gone): a little longer
            sys.stdin.readline()
            waiting = [sock]
            deadline = min(deadline, time.monotonic() + LISTEN)
        if sock in readable:
            data, (source, _) = sock.recvfrom(2048)
            if data == nonce.encode():
                print(f"arrived from {source}", flush=True)
                return 0
    print("none", flush=True)
    return 0


def _send(address: str, nonce: str) -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, TTL)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(address))
    for i in range(COUNT):
        sock.sendto(nonce.encode(), (GROUP, PORT))
        if i + 1 < COUNT:
            time.sleep(0.05)
    return 0


def across(tb, dp) -> MulticastProbe:
    """Probe datapath `dp` as testbed `tb` (up, `dp` in use) carries it: from the first
    worker to the others, pod to pod (node to node on the host's network), through pods
    made for the probe and removed after it; a second pod beside the sender is the control
    (multicast on one node's bridge)."""
    from k8sdds.errors import TestbedError
    from k8sdds.testbed import netns

    workers = list(tb.workers())
    if len(workers) < 2:
        raise TestbedError(f"testbed {tb.spec.name} has {len(workers)} worker: multicast "
                           "across nodes needs two (--nodes 3 or more)")
    if dp.host_network:
        ends = [(n.name, n.ns, n.address) for n in workers]
        return run(ends[0], ends[1:], netns.exec_argv, "nodes")
    pods = [tb.add_pod(n, "mcast", n.shrink(dp.mtu), dp.pod_prefix) for n in workers]
    beside = tb.add_pod(workers[0], "mcast2", workers[0].shrink(dp.mtu), dp.pod_prefix)
    try:
        ends = [(p.node, p.ns, p.address) for p in pods]
        return run(ends[0], ends[1:], netns.exec_argv, "pods",
                   control=(beside.node, beside.ns, beside.address))
    finally:
        tb.remove_pods()


def record_says(dp) -> str:
    """What datapath record `dp` says of multicast: `yes` (across nodes), `same node` (only
    between pods of one node), `no` (not even there)."""
    if dp.multicast_across_nodes:
        return "yes"
    return "same node" if dp.multicast_same_node else "no"


def every_datapath(tb, say=lambda line: None) -> dict[str, MulticastProbe]:
    """Each datapath this machine offers -> its probe, on testbed `tb` (up), rewired for
    each; the datapath it had is wired again after."""
    from k8sdds import model
    from k8sdds.testbed.wiring.kinds import WIRING, datapath_unavailable

    before = tb.load_state().datapath
    out = {}
    for name in WIRING:
        dp = model.datapath(name)
        if datapath_unavailable(dp):
            continue
        say(f"probing multicast on {name}")
        tb.use_datapath(name)
        out[name] = across(tb, dp)
    if before:
        tb.use_datapath(before)
    return out


def main(args: Sequence[str]) -> int:
    if len(args) != 3 or args[0] not in ("recv", "send"):
        print("usage: python -m k8sdds.testbed.multicast recv|send ADDRESS NONCE",
              file=sys.stderr)
        return 2
    mode, address, nonce = args
    return (_receive if mode == "recv" else _send)(address, nonce)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
