"""How each datapath is wired on the emulated cluster (a registry: name -> setup/teardown).

The wiring follows what the real CNI installs in the node's kernel, so packets take the same
path: plain routes for flannel host-gw, and for kube-router with its firewall rules
(k8sdds.testbed.netfilter) and connection tracking, a VXLAN device with static neighbour
and FDB entries for flannel vxlan and calico vxlan, an IP-in-IP device for calico ipip, one
L2 segment for weave (as Weave Net wires a node: cni0, a veth pair to the datapath, which
is Open vSwitch's kernel datapath there and a second bridge here, and the VXLAN on it, with
head-end replication), a WireGuard device per node for flannel wireguard and under the weave
VXLAN for weave encrypted (kernel WireGuard where the kernel has it, else wireguard-go; on a
node that runs its board's own programs, the board's wireguard-go under qemu-user, so the
encryption costs the board's time), k8sdds' own tc programs for cilium (k8sdds.testbed.ebpf:
no bridge, no netfilter on a pod's path), nothing for the host.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from k8sdds import model
from k8sdds.cni.base import TUNNEL, Ebpf, Ipip, L2Segment, Routed, Vxlan, WireGuard
from k8sdds.errors import TestbedError
from k8sdds.testbed import capabilities, ebpf, netfilter, netns, userspace
from k8sdds.testbed.layout import Layout, Node, host_veth
from k8sdds.testbed.netns import ip, run
from k8sdds.testbed.profiles import PROFILES


@dataclass(frozen=True)
class Wiring:
    setup: Callable[[Layout], None]
    teardown: Callable[[Layout], None]
    # called when a node's pods change, with its pods as (name, address)
    pods: Callable[[Layout, Node, Sequence[tuple[str, str]]], None] | None = None


def _nothing(tb: Layout) -> None:
    return None


def _remote_pairs(tb: Layout) -> list[tuple[Node, Node]]:
    return [(a, b) for a in tb.nodes for b in tb.nodes if a is not b]


# ---- routed: flannel host-gw, kube-router ----------------------------------------------
def _routed_setup(tb: Layout) -> None:
    for node, remote in _remote_pairs(tb):
        ip("route", "replace", remote.pod_cidr, "via", remote.address, "dev", "eth0", ns=node.ns)


def _routed_teardown(tb: Layout) -> None:
    for node, remote in _remote_pairs(tb):
        ip("route", "del", remote.pod_cidr, ns=node.ns, check=False)


def _firewall_setup(tb: Layout) -> None:
    _routed_setup(tb)
    for node in tb.nodes:
        netfilter.apply_kube_router(node.ns, [n.pod_cidr for n in tb.nodes],
                                    [n.address for n in tb.nodes], tb.pods_of(node))


def _firewall_teardown(tb: Layout) -> None:
    for node in tb.nodes:
        netfilter.remove_kube_router(node.ns)
    _routed_teardown(tb)


def _firewall_pods(tb: Layout, node: Node, pods: Sequence[tuple[str, str]]) -> None:
    netfilter.sync_pods(node.ns, pods)


# ---- routed VXLAN: flannel vxlan, calico vxlan ------------------------------------------
def vtep_mac(vx: Vxlan, node: Node) -> str:
    """A fixed MAC per node's VTEP, so FDB and neighbour entries can be written up front."""
    return f"{vx.mac_prefix}:{node.index + 1:02x}"


def _vtep_address(node: Node) -> str:
    return node.pod_cidr.split("/")[0]  # the .0 of the node's pod CIDR, as flannel does


def _vxlan_setup(vx: Vxlan, tb: Layout) -> None:
    for node in tb.nodes:
        ip("link", "add", vx.dev, "address", vtep_mac(vx, node), "mtu", str(node.shrink(vx.mtu)),
           "type", "vxlan", "id", str(vx.vni), "local", node.address, "dev", "eth0",
           "dstport", str(vx.port), "nolearning", ns=node.ns)
        ip("addr", "add", f"{_vtep_address(node)}/32", "dev", vx.dev, ns=node.ns)
        ip("link", "set", vx.dev, "up", ns=node.ns)
    for node, remote in _remote_pairs(tb):
        vtep = _vtep_address(remote)
        ip("neigh", "replace", vtep, "lladdr", vtep_mac(vx, remote), "dev", vx.dev,
           "nud", "permanent", ns=node.ns)
        run(["bridge", "-n", node.ns, "fdb", "append", vtep_mac(vx, remote), "dev", vx.dev,
             "dst", remote.address])
        ip("route", "replace", remote.pod_cidr, "via", vtep, "dev", vx.dev, "onlink",
           ns=node.ns)


def _link_teardown(dev: str, tb: Layout) -> None:
    for node in tb.nodes:
        ip("link", "del", dev, ns=node.ns, check=False)


# ---- IP-in-IP: calico ipip ---------------------------------------------------------------
def _ipip_setup(tun: Ipip, tb: Layout) -> None:
    for node in tb.nodes:
        if ip("link", "show", tun.dev, ns=node.ns, check=False).returncode != 0:
            ip("link", "add", tun.dev, "type", "ipip", ns=node.ns)
        ip("link", "set", tun.dev, "mtu", str(node.shrink(tun.mtu)), "up", ns=node.ns)
        ip("addr", "replace", f"{_vtep_address(node)}/32", "dev", tun.dev, ns=node.ns)
    for node, remote in _remote_pairs(tb):
        ip("route", "replace", remote.pod_cidr, "via", remote.address, "dev", tun.dev,
           "onlink", ns=node.ns)


def _ipip_teardown(tun: Ipip, tb: Layout) -> None:
    for node in tb.nodes:
        ip("addr", "flush", "dev", tun.dev, ns=node.ns, check=False)
        ip("link", "set", tun.dev, "down", ns=node.ns, check=False)
    _routed_teardown(tb)


# ---- WireGuard between nodes: flannel wireguard, and the underlay of weave encrypted ------
TUNNEL_PROCESSES = ("wireguard-go",)  # userspace datapath processes in the nodes
WG_PORT, WG_MTU = TUNNEL.port, TUNNEL.mtu  # the CNI records' WireGuard
TUNNEL_NET = "10.98.0"  # node tunnel addresses: 10.98.0.<10+n>/24


def wg_interface(tb: Layout, node: Node) -> str:
    """Unique across testbeds: wireguard-go's control socket lives in the shared
    /var/run/wireguard, and interface names have at most 15 characters."""
    digest = hashlib.sha1(tb.spec.name.encode()).hexdigest()[:6]
    return f"kw{digest}{node.index}"


def _tunnel_address(node: Node) -> str:
    return f"{TUNNEL_NET}.{10 + node.index}"


def _key_dir(tb: Layout) -> Path:
    return tb.state_file.with_suffix(".keys")


def _wg_setup(tb: Layout, route_pods: bool) -> None:
    mode, reason = capabilities.wireguard()
    if mode is None:
        raise TestbedError(f"no WireGuard here: {reason}")
    keys = _key_dir(tb)
    keys.mkdir(mode=0o700, parents=True, exist_ok=True)
    public = {}
    for node in tb.nodes:
        dev = wg_interface(tb, node)
        arch = PROFILES[node.profile].program_arch
        if arch:  # the board's own, at the board's pace
            _board_tunnel(node, dev, arch)
        elif mode == "kernel":
            ip("link", "add", dev, "type", "wireguard", ns=node.ns)
        else:  # wireguard-go creates the TUN device in the namespace and daemonizes there
            run(netns.exec_argv(node.ns, ["wireguard-go", dev]))
        key_file = keys / f"{node.name}.key"
        private = run(["wg", "genkey"]).stdout.strip()
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(private + "\n")
        public[node.name] = subprocess.run(["wg", "pubkey"], input=private, text=True,
                                           capture_output=True, check=True).stdout.strip()
        run(netns.exec_argv(node.ns, ["wg", "set", dev, "listen-port", str(WG_PORT),
                                      "private-key", str(key_file)]))
        ip("addr", "add", f"{_tunnel_address(node)}/24", "dev", dev, ns=node.ns)
        ip("link", "set", dev, "mtu", str(node.shrink(WG_MTU)), "up", ns=node.ns)
    for node, remote in _remote_pairs(tb):
        allowed = f"{_tunnel_address(remote)}/32" + (f",{remote.pod_cidr}" if route_pods else "")
        run(netns.exec_argv(node.ns, ["wg", "set", wg_interface(tb, node), "peer",
                                      public[remote.name], "endpoint",
                                      f"{remote.address}:{WG_PORT}", "allowed-ips", allowed]))
        if route_pods:
            ip("route", "replace", remote.pod_cidr, "dev", wg_interface(tb, node), ns=node.ns)
    _wg_wait_ready(tb)


TUNNEL_START = 20.0  # seconds for a board's wireguard-go to make its device under qemu-user
WG_SOCKETS = "/var/run/wireguard"  # wireguard-go's control sockets (wg's userspace API)


def _board_tunnel(node: Node, dev: str, arch: str) -> None:
    """The board's own wireguard-go for `node`, in the foreground under qemu-user (its daemon
    mode executes itself again, which qemu-user cannot follow), named wireguard-go
    (userspace.launcher), so it is found, charged and stopped as the native one is; back
    once its device is there."""
    from k8sdds.images import board_root

    argv = userspace.wrap(["wireguard-go", "-f", dev], arch, board_root.root(arch))
    subprocess.Popen(netns.exec_argv(node.ns, argv), stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    deadline = time.monotonic() + TUNNEL_START
    socket = Path(WG_SOCKETS) / f"{dev}.sock"  # where `wg` finds a userspace WireGuard
    while ip("link", "show", "dev", dev, ns=node.ns, check=False).returncode or \
            not socket.exists():
        if time.monotonic() > deadline:
            raise TestbedError(f"the board's wireguard-go ({arch}) made no {dev} and "
                               f"{socket} in {node.name} within {TUNNEL_START:g} s")
        time.sleep(0.1)


WG_READY_TIMEOUT = 20.0  # seconds for every tunnel's first handshake


def _wg_wait_ready(tb: Layout) -> None:
    """Return once every node reaches every other through its tunnel, so no measurement pays
    for a handshake (a lost first initiation costs wireguard-go a 5 s retry)."""
    deadline = time.monotonic() + WG_READY_TIMEOUT
    for node, remote in _remote_pairs(tb):
        while run(netns.exec_argv(node.ns, ["ping", "-c", "1", "-W", "1",
                                            _tunnel_address(remote)]), check=False).returncode:
            if time.monotonic() > deadline:
                raise TestbedError(f"WireGuard tunnel {node.name} -> {remote.name} did not come "
                                   f"up within {WG_READY_TIMEOUT:g} s")


def _wg_teardown(tb: Layout) -> None:
    for node in tb.nodes:
        ip("link", "del", wg_interface(tb, node), ns=node.ns, check=False)
        netns.kill_all(node.ns, grace=1.0, comm="wireguard-go")
    shutil.rmtree(_key_dir(tb), ignore_errors=True)


# ---- one L2 segment: weave, and weave encrypted ------------------------------------------
def _segment_setup(seg: L2Segment, tb: Layout) -> None:
    """Pods of every node share one prefix (10.244.0.0/16); the names are the CNI's own."""
    if seg.encrypted:
        _wg_setup(tb, route_pods=False)

    def underlay(node: Node) -> tuple[str, str]:  # (address, device) the VXLAN rides on
        if seg.encrypted:
            return _tunnel_address(node), wg_interface(tb, node)
        return node.address, "eth0"

    mtu = seg.mtu
    for node in tb.nodes:
        local, dev = underlay(node)
        ip("addr", "del", f"{node.gateway}/24", "dev", "cni0", ns=node.ns, check=False)
        ip("addr", "replace", f"{node.gateway}/{seg.prefix}", "dev", "cni0", ns=node.ns)
        ip("link", "add", seg.dev, "mtu", str(node.shrink(mtu)), "type", "vxlan", "id", "2",
           "local", local, "dev", dev, "dstport", str(seg.port), ns=node.ns)
        # weave's own topology: the pods' bridge reaches the datapath (Open vSwitch's
        # kernel datapath; a second bridge here) through a veth pair, the VXLAN hangs there
        ip("link", "add", seg.bridge, "type", "bridge", "mcast_snooping", "0", ns=node.ns)
        ip("link", "add", seg.veth[0], "mtu", str(node.shrink(mtu)), "type", "veth", "peer",
           "name", seg.veth[1], "mtu", str(node.shrink(mtu)), ns=node.ns)
        ip("link", "set", seg.veth[0], "master", "cni0", "up", ns=node.ns)
        ip("link", "set", seg.veth[1], "master", seg.bridge, "up", ns=node.ns)
        ip("link", "set", seg.dev, "master", seg.bridge, "up", ns=node.ns)
        ip("link", "set", seg.bridge, "up", ns=node.ns)
    for node, remote in _remote_pairs(tb):
        # head-end replication: broadcast, multicast and unknown unicast go to every node
        run(["bridge", "-n", node.ns, "fdb", "append", "00:00:00:00:00:00", "dev", seg.dev,
             "dst", underlay(remote)[0]])


def _segment_teardown(seg: L2Segment, tb: Layout) -> None:
    for node in tb.nodes:
        for dev in (seg.dev, seg.veth[0], seg.bridge):
            ip("link", "del", dev, ns=node.ns, check=False)
        ip("addr", "del", f"{node.gateway}/{seg.prefix}", "dev", "cni0", ns=node.ns,
           check=False)
        ip("addr", "replace", f"{node.gateway}/24", "dev", "cni0", ns=node.ns)
    if seg.encrypted:
        _wg_teardown(tb)


# ---- Cilium's eBPF datapath: cilium-vxlan, cilium-native ---------------------------------
def _ebpf_setup(kind: Ebpf, mtu: int, tb: Layout) -> None:
    reason = ebpf.unavailable()
    if reason:
        raise TestbedError(f"no eBPF datapath here: {reason}")
    for node in tb.nodes:
        if kind.tunnel:  # one device for every remote node: the programs give the remote end
            ip("link", "add", kind.tunnel, "mtu", str(node.shrink(mtu)), "type", "vxlan",
               "external", "dstport", str(kind.port), ns=node.ns)
            ip("link", "set", kind.tunnel, "up", ns=node.ns)
    if not kind.tunnel:
        _routed_setup(tb)  # what the uplink's FIB lookup finds (Cilium: auto-direct-node-routes)
    for node in tb.nodes:
        _ebpf_pods(kind, tb, node, tb.pods_of(node))


def _link(ns: str, dev: str) -> dict:
    return json.loads(ip("-j", "link", "show", "dev", dev, ns=ns).stdout)[0]


def _ebpf_pods(kind: Ebpf, tb: Layout, node: Node, pods: Sequence[tuple[str, str]]) -> None:
    """The node's programs compiled for its pods and attached: on each pod's host veth, and
    on the tunnel device or the uplink."""
    endpoints = []
    for name, address in pods:
        host = _link(node.ns, host_veth(name))
        mac = _link(tb.pod_namespace(node, name), "eth0")["address"]
        endpoints.append(ebpf.Endpoint(address, host["ifindex"], mac, host["address"]))
    remotes = [ebpf.OtherNode(r.pod_cidr, r.address) for r in tb.nodes if r is not node]
    header = ebpf.config(bool(kind.tunnel), kind.vni, _link(node.ns, "eth0")["ifindex"],
                         _link(node.ns, kind.tunnel)["ifindex"] if kind.tunnel else 0,
                         endpoints, remotes)
    obj = ebpf.build(header, tb.state_file.with_suffix(".bpf") / node.name)
    for name, _ in pods:
        ebpf.attach(node.ns, host_veth(name), obj, ebpf.FROM_CONTAINER)
    if kind.tunnel:
        ebpf.attach(node.ns, kind.tunnel, obj, ebpf.FROM_OVERLAY)
    else:
        ebpf.attach(node.ns, "eth0", obj, ebpf.FROM_NETDEV)


def _ebpf_teardown(kind: Ebpf, tb: Layout) -> None:
    for node in tb.nodes:
        if kind.tunnel:
            ip("link", "del", kind.tunnel, ns=node.ns, check=False)
        else:
            ebpf.detach(node.ns, "eth0")
    if not kind.tunnel:
        _routed_teardown(tb)
    shutil.rmtree(tb.state_file.with_suffix(".bpf"), ignore_errors=True)


def _wiring(kind: object, mtu: int) -> Wiring:
    """The setup and teardown a CNI record's wiring asks for (a registry by its kind)."""
    if isinstance(kind, Routed) and kind.firewall:
        return Wiring(_firewall_setup, _firewall_teardown, _firewall_pods)
    if isinstance(kind, Routed):
        return Wiring(_routed_setup, _routed_teardown)
    if isinstance(kind, Vxlan):
        return Wiring(partial(_vxlan_setup, kind), partial(_link_teardown, kind.dev))
    if isinstance(kind, Ipip):
        return Wiring(partial(_ipip_setup, kind), partial(_ipip_teardown, kind))
    if isinstance(kind, WireGuard):
        return Wiring(partial(_wg_setup, route_pods=True), _wg_teardown)
    if isinstance(kind, L2Segment):
        return Wiring(partial(_segment_setup, kind), partial(_segment_teardown, kind))
    if isinstance(kind, Ebpf):
        return Wiring(partial(_ebpf_setup, kind, mtu), partial(_ebpf_teardown, kind),
                      partial(_ebpf_pods, kind))
    raise TypeError(f"no wiring for {kind!r}")


# the datapaths the emulated testbed wires, from the CNI records (k8sdds/cni)
WIRING: dict[str, Wiring] = {
    name: (Wiring(_nothing, _nothing) if dp.host_network else _wiring(dp.wiring, dp.mtu))
    for name, dp in model.DATAPATHS.items() if dp.host_network or dp.wiring is not None}
