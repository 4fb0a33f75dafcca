"""Calico: BGP-routed pod CIDRs, or VXLAN (vxlan.calico) or IP-in-IP (tunl0) overlays."""

from __future__ import annotations

from collections.abc import Mapping

from k8sdds.cni.base import (
    Cni,
    Datapath,
    Detected,
    Install,
    Ipip,
    Reset,
    UpstreamManifest,
    Vxlan,
    containers,
    named,
    where,
)

POD_CIDR = "192.168.0.0/16"

DATAPATHS = (
    Datapath("calico-vxlan", "Calico VXLAN: vxlan.calico, VNI 4096, UDP 4789, routed",
             "VXLAN", 1450, False, kernel_links=("vxlan",),
             wiring=Vxlan("vxlan.calico", 4096, 4789, 1450, "0e:6b:64:00:02")),
    Datapath("calico-ipip", "Calico IP-in-IP: tunl0, routes via remote nodes onlink",
             "IP-in-IP", 1480, False, kernel_links=("ipip",), wiring=Ipip("tunl0", 1480)),
    # found on real clusters (kubernetes backend), not emulated
    Datapath("calico", "Calico BGP: pod CIDRs routed between nodes, no encapsulation",
             "none (routed)", 1500, False),
)


def detect(ds: Mapping, config_maps: Mapping[tuple[str, str], Mapping]) -> Detected | None:
    if "calico" not in named(ds):
        return None
    env = {e.get("name"): str(e.get("value", "")) for c in containers(ds)
           for e in c.get("env") or []}
    if env.get("CALICO_IPV4POOL_IPIP", "").lower() in ("always", "crosssubnet"):
        return Detected("calico-ipip", "calico (IP-in-IP)", where(ds))
    if env.get("CALICO_IPV4POOL_VXLAN", "").lower() in ("always", "crosssubnet"):
        return Detected("calico-vxlan", "calico (VXLAN)", where(ds))
    return Detected("calico", "calico (BGP, no encapsulation)", where(ds))


CNI = Cni(
    "calico", DATAPATHS,
    manifest=UpstreamManifest(
        "calico.yaml", "9a575859428b822a224dedafc4238555b6b0f910f2abf12983f20f871860914e",
        "https://raw.githubusercontent.com/projectcalico/calico/v3.29.3/manifests/calico.yaml"),
    installs=(Install("calico", POD_CIDR, "calico-ipip"),),
    detect=detect,
    reset=Reset(files=("/opt/cni/bin/calico", "/opt/cni/bin/calico-ipam", "/var/lib/calico",
                       "/var/run/calico", "/var/log/calico", "/var/run/nodeagent"),
                links=("tunl0", "vxlan.calico"), chains=("cali-",)),
    aliases={"calico": "calico-vxlan"},
)
