"""Cilium: an eBPF datapath, VXLAN between nodes by default; installed by its own CLI."""

from __future__ import annotations

from collections.abc import Mapping

from k8sdds.cni.base import Argv, Cni, Datapath, Detected, Install, Reset, named, where

VERSION = "1.17.4"
CONFIG_MAPS = (("kube-system", "cilium-config"),)


def installer(install: Install, kubeconfig: str) -> Argv:
    return ("cilium", "install", "--kubeconfig", kubeconfig, "--version", VERSION, "--set",
            "ipam.mode=kubernetes")


def detect(ds: Mapping, config_maps: Mapping[tuple[str, str], Mapping]) -> Detected | None:
    if "cilium" not in named(ds) or "operator" in (ds.get("metadata") or {}).get("name", ""):
        return None
    conf = (config_maps.get(CONFIG_MAPS[0]) or {}).get("data") or {}
    mode = conf.get("routing-mode") or conf.get("tunnel") or "vxlan"
    return Detected("cilium", f"cilium ({mode})", where(ds))


CNI = Cni(
    "cilium",
    (Datapath("cilium", "Cilium: eBPF datapath, VXLAN tunnel by default", "VXLAN (eBPF)",
              1450, False),),
    installs=(Install("cilium", "10.244.0.0/16", "cilium"),),
    installer=installer, detect=detect, config_maps=CONFIG_MAPS,
    reset=Reset(files=("/opt/cni/bin/cilium-cni",), links=("cilium_host", "cilium_vxlan"),
                chains=("CILIUM_",)),
)
