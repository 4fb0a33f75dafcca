"""A WireGuard device per node: flannel wireguard, and the underlay of weave encrypted
(kernel WireGuard where the kernel has it, else wireguard-go; on a node that runs its board's
own programs, the board's wireguard-go under qemu-user, so the encryption costs the board's
time)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from functools import partial
from pathlib import Path

from k8sdds.cni.base import TUNNEL, WireGuard
from k8sdds.errors import TestbedError
from k8sdds.testbed import capabilities, netns, userspace
from k8sdds.testbed.layout import Layout, Node
from k8sdds.testbed.netns import ip, run
from k8sdds.testbed.profiles import PROFILES
from k8sdds.testbed.wiring.hooks import Wiring, remote_pairs

KIND = WireGuard
TUNNEL_PROCESSES = ("wireguard-go",)  # userspace datapath processes in the nodes
WG_PORT, WG_MTU = TUNNEL.port, TUNNEL.mtu  # the CNI records' WireGuard
TUNNEL_NET = "10.98.0"  # node tunnel addresses: 10.98.0.<10+n>/24


def wg_interface(tb: Layout, node: Node) -> str:
    """Unique across testbeds: wireguard-go's control socket lives in the shared
    /var/run/wireguard, and interface names have at most 15 characters."""
    digest = hashlib.sha1(tb.spec.name.encode()).hexdigest()[:6]
    return f"kw{digest}{node.index}"


def tunnel_address(node: Node) -> str:
    return f"{TUNNEL_NET}.{10 + node.index}"


def _key_dir(tb: Layout) -> Path:
    return tb.state_file.with_suffix(".keys")


def setup(tb: Layout, route_pods: bool) -> None:
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
        ip("addr", "add", f"{tunnel_address(node)}/24", "dev", dev, ns=node.ns)
        ip("link", "set", dev, "mtu", str(node.shrink(WG_MTU)), "up", ns=node.ns)
    for node, remote in remote_pairs(tb):
        allowed = f"{tunnel_address(remote)}/32" + (f",{remote.pod_cidr}" if route_pods else "")
        run(netns.exec_argv(node.ns, ["wg", "set", wg_interface(tb, node), "peer",
                                      public[remote.name], "endpoint",
                                      f"{remote.address}:{WG_PORT}", "allowed-ips", allowed]))
        if route_pods:
            ip("route", "replace", remote.pod_cidr, "dev", wg_interface(tb, node), ns=node.ns)
    _wait_ready(tb)


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


def _wait_ready(tb: Layout) -> None:
    """Return once every node reaches every other through its tunnel, so no measurement pays
    for a handshake (a lost first initiation costs wireguard-go a 5 s retry)."""
    deadline = time.monotonic() + WG_READY_TIMEOUT
    for node, remote in remote_pairs(tb):
        while run(netns.exec_argv(node.ns, ["ping", "-c", "1", "-W", "1",
                                            tunnel_address(remote)]), check=False).returncode:
            if time.monotonic() > deadline:
                raise TestbedError(f"WireGuard tunnel {node.name} -> {remote.name} did not come "
                                   f"up within {WG_READY_TIMEOUT:g} s")


def teardown(tb: Layout) -> None:
    for node in tb.nodes:
        ip("link", "del", wg_interface(tb, node), ns=node.ns, check=False)
        netns.kill_all(node.ns, grace=1.0, comm="wireguard-go")
    shutil.rmtree(_key_dir(tb), ignore_errors=True)


def unavailable() -> str | None:
    """Why no WireGuard can be made here (neither the kernel's nor wireguard-go), or None."""
    return capabilities.wireguard()[1]


def wiring(kind: WireGuard, mtu: int) -> Wiring:
    return Wiring(partial(setup, route_pods=True), teardown, unavailable=unavailable)
