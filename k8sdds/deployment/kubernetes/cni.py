"""Which CNI a cluster runs, from its DaemonSets and their configuration: pure.

Input is what the API returns, as dicts (`ApiClient.sanitize_for_serialization`): the
DaemonSets of every namespace, and the ConfigMaps that name a CNI's mode (flannel's
`net-conf.json`, cilium's `cilium-config`). Output is a datapath name of k8sdds.model.DATAPATHS.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# the ConfigMaps detection reads: (namespace, name)
CONFIG_MAPS = (("kube-flannel", "kube-flannel-cfg"), ("kube-system", "kube-flannel-cfg"),
               ("kube-system", "cilium-config"), ("kube-system", "k8sdds-datapath"))

FLANNEL_BACKENDS = {"vxlan": "flannel-vxlan", "host-gw": "flannel-hostgw",
                    "wireguard": "flannel-wireguard", "extension": "flannel-vxlan"}


@dataclass(frozen=True)
class Detected:
    datapath: str  # a name of k8sdds.model.DATAPATHS, or "unknown"
    cni: str  # what was found, for the manifest ("flannel (vxlan)", "weave (encrypted)")
    daemonset: str = ""  # namespace/name of the CNI's DaemonSet


def detect(daemonsets: Iterable[Mapping], config_maps: Mapping[tuple[str, str], Mapping]
           ) -> Detected:
    """The cluster's CNI: the first DaemonSet whose name or containers' images name one."""
    for ds in daemonsets:
        meta = ds.get("metadata") or {}
        where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        containers = _containers(ds)
        text = " ".join([meta.get("name", "")] + [c.get("image", "") for c in containers])
        if "flannel" in text and "kube-router" not in text:
            mode = _flannel_backend(config_maps)
            return Detected(FLANNEL_BACKENDS.get(mode, "flannel-vxlan"),
                            f"flannel ({mode or 'vxlan, by default'})", where)
        if "kube-router" in text:
            return Detected("kube-router", "kube-router", where)
        if "weave" in text:
            encrypted = any(e.get("name") == "WEAVE_PASSWORD" for c in containers
                            for e in c.get("env") or [])
            return (Detected("weave-encrypted", "weave (encrypted)", where) if encrypted
                    else Detected("weave", "weave", where))
        if "calico" in text:
            env = {e.get("name"): str(e.get("value", "")) for c in containers
                   for e in c.get("env") or []}
            if env.get("CALICO_IPV4POOL_IPIP", "").lower() in ("always", "crosssubnet"):
                return Detected("calico-ipip", "calico (IP-in-IP)", where)
            if env.get("CALICO_IPV4POOL_VXLAN", "").lower() in ("always", "crosssubnet"):
                return Detected("calico-vxlan", "calico (VXLAN)", where)
            return Detected("calico", "calico (BGP, no encapsulation)", where)
        if "cilium" in text and "operator" not in meta.get("name", ""):
            conf = (config_maps.get(("kube-system", "cilium-config")) or {}).get("data") or {}
            mode = conf.get("routing-mode") or conf.get("tunnel") or "vxlan"
            return Detected("cilium", f"cilium ({mode})", where)
    marker = (config_maps.get(("kube-system", "k8sdds-datapath")) or {}).get("data") or {}
    if marker.get("datapath"):  # a k8sdds testbed cluster whose pods ride its own wiring
        return Detected(str(marker["datapath"]), f"{marker['datapath']}, emulated wiring of a "
                        "k8sdds testbed (no CNI DaemonSet)", "kube-system/k8sdds-datapath")
    return Detected("unknown", "no known CNI DaemonSet (flannel, kube-router, weave, calico, "
                    "cilium) found")


def _containers(ds: Mapping) -> list[Mapping]:
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    return list(spec.get("containers") or []) + list(spec.get("initContainers") or [])


def _flannel_backend(config_maps: Mapping[tuple[str, str], Mapping]) -> str:
    for key in CONFIG_MAPS[:2]:
        data = (config_maps.get(key) or {}).get("data") or {}
        try:
            conf = json.loads(data.get("net-conf.json", ""))
            return str(conf["Backend"]["Type"]).lower()
        except (ValueError, KeyError, TypeError):
            continue
    return ""
