"""Cilium: an eBPF datapath, VXLAN between nodes by default or native routing; installed by
its own CLI on a kubeadm cluster. The emulated testbed wires each mode with k8sdds' own tc
programs (k8sdds/testbed/bpf/datapath.c, see base.Ebpf)."""

from __future__ import annotations

from collections.abc import Mapping

from k8sdds.cni.base import Argv, Cni, Datapath, Detected, Ebpf, Install, Reset, named, where

VERSION = "1.17.4"
CONFIG_MAPS = (("kube-system", "cilium-config"),)
VXLAN = "cilium-vxlan"
NATIVE = "cilium-native"

DATAPATHS = (
    Datapath(VXLAN, "Cilium, VXLAN tunnel (its default): tc programs move a pod's packets "
             "to cilium_vxlan, the remote node as tunnel key, and from it into the pod "
             "(bpf_redirect_peer); no bridge, no netfilter on a pod's path", "VXLAN (eBPF)",
             1450, False, pod_prefix=32, kernel_links=("vxlan",),
             wiring=Ebpf(tunnel="cilium_vxlan")),
    Datapath(NATIVE, "Cilium, native routing: tc programs move a pod's packets to the "
             "uplink after a FIB lookup (bpf_redirect_neigh) and from it into the pod "
             "(bpf_redirect_peer); a route per node's pod CIDR, no bridge, no netfilter on "
             "a pod's path", "none (routed, eBPF)", 1500, False, pod_prefix=32,
             wiring=Ebpf()),
)


def installer(install: Install, kubeconfig: str) -> Argv:
    return ("cilium", "install", "--kubeconfig", kubeconfig, "--version", VERSION, "--set",
            "ipam.mode=kubernetes")


def datapath(conf: Mapping) -> str | None:
    """The datapath cilium-config's data names, or None for one k8sdds does not have
    (Geneve). Pure."""
    if (conf.get("routing-mode") or conf.get("tunnel")) in ("native", "disabled"):
        return NATIVE
    protocol = conf.get("tunnel-protocol") or conf.get("tunnel") or "vxlan"
    return VXLAN if protocol == "vxlan" else None


def detect(ds: Mapping, config_maps: Mapping[tuple[str, str], Mapping]) -> Detected | None:
    if "cilium" not in named(ds) or "operator" in (ds.get("metadata") or {}).get("name", ""):
        return None
    conf = (config_maps.get(CONFIG_MAPS[0]) or {}).get("data") or {}
    said = [conf.get("routing-mode"), conf.get("tunnel-protocol") or conf.get("tunnel")]
    mode = ", ".join(str(word) for word in said if word) or "vxlan"
    return Detected(datapath(conf) or "unknown", f"cilium ({mode})", where(ds))


CNI = Cni(
    "cilium",
    DATAPATHS,
    installs=(Install("cilium", "10.244.0.0/16", VXLAN),),
    installer=installer, detect=detect, config_maps=CONFIG_MAPS,
    reset=Reset(files=("/opt/cni/bin/cilium-cni",), links=("cilium_host", "cilium_vxlan"),
                chains=("CILIUM_",)),
)
