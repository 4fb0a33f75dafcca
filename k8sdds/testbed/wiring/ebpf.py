"""Cilium's datapath on the emulated testbed: k8sdds' own tc programs (bpf/datapath.c),
compiled for each node with that node's configuration by Debian's clang-19 (the LLVM of
Cilium's own images, 19.1.7), as Cilium's agent compiles its programs for each node and
endpoint, and attached with tc in direct-action mode (no bridge, no netfilter on a pod's
path); bpftool reads what they counted."""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import json
import shutil
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from k8sdds.cni.base import Ebpf
from k8sdds.errors import TestbedError
from k8sdds.results import atomic_write
from k8sdds.testbed.layout import Layout, Node, host_veth
from k8sdds.testbed.netns import ip, run
from k8sdds.testbed.wiring.hooks import Wiring, route_setup, route_teardown

KIND = Ebpf

SOURCE = Path(__file__).parent / "bpf" / "datapath.c"
CLANG = "clang-19"
# what the programs need here: a tool -> its Debian package (the headers: libbpf-dev)
TOOLS = {CLANG: "clang-19", "bpftool": "bpftool", "tc": "iproute2"}
HELPERS = Path("/usr/include/bpf/bpf_helpers.h")
PACKAGES = (*TOOLS.values(), "libbpf-dev")
# datapath.c's programs by their sections (Cilium's names before 1.14), in the order of its
# counters (k8sdds_hits)
FROM_CONTAINER, FROM_NETDEV, FROM_OVERLAY = PROGRAMS = (
    "from-container", "from-netdev", "from-overlay")
COUNTERS = "k8sdds_hits"


@dataclass(frozen=True)
class Endpoint:
    """A pod of the node, as its programs deliver to it."""

    address: str
    ifindex: int  # its host-side veth's
    mac: str  # its eth0's
    host_mac: str  # its host-side veth's


@dataclass(frozen=True)
class OtherNode:
    """Another node: its pods' range and its address (the tunnel's remote end)."""

    pod_cidr: str
    address: str


def unavailable() -> str | None:
    """Why the programs cannot be built and attached here, or None."""
    missing = [package for tool, package in TOOLS.items() if shutil.which(tool) is None]
    if not HELPERS.exists():
        missing.append("libbpf-dev")
    if missing:
        return (f"its eBPF programs need {', '.join(missing)} (apt-get install "
                f"--no-install-recommends {' '.join(missing)})")
    return None


def _u32(address: str) -> str:
    return f"0x{int(ipaddress.IPv4Address(address)):08x}"


def _octets(mac: str) -> str:
    return ", ".join(f"0x{part}" for part in mac.split(":"))


def config(tunnel: bool, vni: int, netdev: int, tunnel_ifindex: int,
           endpoints: Sequence[Endpoint], remotes: Sequence[OtherNode]) -> str:
    """node_config.h: what datapath.c reads of one node. Pure."""
    lines = ["// written by k8sdds/testbed/wiring/ebpf.py for one node of an emulated testbed",
             f"#define TUNNEL {int(tunnel)}",
             f"#define VNI {vni}", f"#define NETDEV_IFINDEX {netdev}",
             f"#define TUNNEL_IFINDEX {tunnel_ifindex}", "#define ENDPOINTS(X) \\"]
    lines += [f"\tX({_u32(e.address)}, {e.ifindex}, {_octets(e.mac)}, {_octets(e.host_mac)}) \\"
              for e in endpoints]
    lines += ["", "#define REMOTES(X) \\"]
    for r in remotes:
        net = ipaddress.IPv4Network(r.pod_cidr)
        lines.append(f"\tX({_u32(str(net.network_address))}, {_u32(str(net.netmask))}, "
                     f"{_u32(r.address)}) \\")
    return "\n".join(lines) + "\n\n"


def build(header: str, folder: Path) -> Path:
    """The programs compiled with `header` as node_config.h, in `folder`; the object."""
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / "node_config.h", header)
    obj = folder / "datapath.o"
    include = Path("/usr/include") / (sysconfig.get_config_var("MULTIARCH") or "")
    proc = run([CLANG, "-O2", "-g", "-Wall", "-Werror", "-target", "bpf", "-I", str(folder),
                "-I", str(include), "-c", str(SOURCE), "-o", str(obj)], check=False)
    if proc.returncode:
        raise TestbedError(f"{CLANG} could not compile {SOURCE.name} for {folder.name}: "
                           f"{proc.stderr.strip()[-2000:]}")
    return obj


def attach(ns: str, dev: str, obj: Path, program: str) -> None:
    """`program` of `obj` on `dev`'s ingress in namespace `ns` (replacing what was there)."""
    run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "clsact"])
    proc = run(["tc", "-n", ns, "filter", "replace", "dev", dev, "ingress", "pref", "1",
                "handle", "1", "bpf", "da", "obj", str(obj), "sec", program], check=False)
    if proc.returncode:
        raise TestbedError(f"tc could not attach {program} to {dev} in {ns}: "
                           f"{proc.stderr.strip()[-2000:]}")


def detach(ns: str, dev: str) -> None:
    run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "clsact"], check=False)


def hits(ns: str, devices: Sequence[str]) -> dict[str, int]:
    """The packets the programs on `devices` (in `ns`) redirected, by program."""
    counts = dict.fromkeys(PROGRAMS, 0)
    for dev in devices:
        filters = json.loads(run(["tc", "-n", ns, "-j", "filter", "show", "dev", dev,
                                  "ingress"]).stdout or "[]")
        for prog in (f.get("options", {}).get("prog", {}) for f in filters):
            if "id" not in prog:
                continue
            shown = json.loads(run(["bpftool", "-j", "prog", "show", "id",
                                    str(prog["id"])]).stdout)
            for map_id in shown.get("map_ids", []):
                about = json.loads(run(["bpftool", "-j", "map", "show", "id",
                                        str(map_id)]).stdout)
                if about.get("name") != COUNTERS:
                    continue
                for entry in json.loads(run(["bpftool", "-j", "map", "dump", "id",
                                             str(map_id)]).stdout):
                    entry = entry.get("formatted", entry)  # by its BTF, if tc loaded it
                    counts[PROGRAMS[_number(entry["key"])]] += _number(entry["value"])
    return counts


def _number(field: int | list[str]) -> int:
    """A map's key or value as bpftool prints it: a number (with the map's BTF) or its
    bytes in hex, little-endian as this machine's."""
    if isinstance(field, int):
        return field
    return int.from_bytes(bytes(int(b, 16) for b in field), sys.byteorder)


# the kernel's features the programs use, by Cilium's routing mode (a fingerprint says them)
FEATURES = {"tunnel": ("tc clsact", "bpf_redirect", "bpf_redirect_peer",
                       "bpf_skb_set_tunnel_key", "a collect-metadata VXLAN device"),
            "native": ("tc clsact", "bpf_redirect", "bpf_redirect_peer", "bpf_redirect_neigh")}


@functools.cache
def about(routing_mode: str) -> dict[str, str]:
    """Which programs, built by what, using which of the kernel's features: for a node's
    fingerprint."""
    clang = run([CLANG, "--version"], check=False).stdout.splitlines()
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return {"programs": f"k8sdds' own tc programs ({SOURCE.name}, sha256 {digest}), "
                        "compiled for each node",
            "compiler": clang[0].strip() if clang else f"{CLANG}: not found",
            "kernel_features": ", ".join(FEATURES[routing_mode])}


# ---- the wiring: the programs on every node, built for its pods --------------------------
def _setup(kind: Ebpf, mtu: int, tb: Layout) -> None:
    reason = unavailable()
    if reason:
        raise TestbedError(f"no eBPF datapath here: {reason}")
    for node in tb.nodes:
        if kind.tunnel:  # one device for every remote node: the programs give the remote end
            ip("link", "add", kind.tunnel, "mtu", str(node.shrink(mtu)), "type", "vxlan",
               "external", "dstport", str(kind.port), ns=node.ns)
            ip("link", "set", kind.tunnel, "up", ns=node.ns)
    if not kind.tunnel:
        route_setup(tb)  # what the uplink's FIB lookup finds (Cilium: auto-direct-node-routes)
    for node in tb.nodes:
        _pods(kind, tb, node, tb.pods_of(node))


def _link(ns: str, dev: str) -> dict:
    return json.loads(ip("-j", "link", "show", "dev", dev, ns=ns).stdout)[0]


def _pods(kind: Ebpf, tb: Layout, node: Node, pods: Sequence[tuple[str, str]]) -> None:
    """The node's programs compiled for its pods and attached: on each pod's host veth, and
    on the tunnel device or the uplink."""
    endpoints = []
    for name, address in pods:
        host = _link(node.ns, host_veth(name))
        mac = _link(tb.pod_namespace(node, name), "eth0")["address"]
        endpoints.append(Endpoint(address, host["ifindex"], mac, host["address"]))
    remotes = [OtherNode(r.pod_cidr, r.address) for r in tb.nodes if r is not node]
    header = config(bool(kind.tunnel), kind.vni, _link(node.ns, "eth0")["ifindex"],
                         _link(node.ns, kind.tunnel)["ifindex"] if kind.tunnel else 0,
                         endpoints, remotes)
    obj = build(header, tb.state_file.with_suffix(".bpf") / node.name)
    for name, _ in pods:
        attach(node.ns, host_veth(name), obj, FROM_CONTAINER)
    if kind.tunnel:
        attach(node.ns, kind.tunnel, obj, FROM_OVERLAY)
    else:
        attach(node.ns, "eth0", obj, FROM_NETDEV)


def _teardown(kind: Ebpf, tb: Layout) -> None:
    for node in tb.nodes:
        if kind.tunnel:
            ip("link", "del", kind.tunnel, ns=node.ns, check=False)
        else:
            detach(node.ns, "eth0")
    if not kind.tunnel:
        route_teardown(tb)
    shutil.rmtree(tb.state_file.with_suffix(".bpf"), ignore_errors=True)


def wiring(kind: Ebpf, mtu: int) -> Wiring:
    return Wiring(partial(_setup, kind, mtu), partial(_teardown, kind), partial(_pods, kind),
                  partial(about, "tunnel" if kind.tunnel else "native"), unavailable)
