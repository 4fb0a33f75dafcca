"""Flannel: host-gw (routes), vxlan (flannel.1) and wireguard backends of one DaemonSet,
flanneld, with the flannel CNI plugin.

Real on the testbed cluster: flanneld as the upstream kube-flannel DaemonSet in images built
here from flannel's Go module. What differs from the upstream manifest there, and why
(`testbed_adapt` does it, nothing else):
* the images are the ones built here (no registry);
* the host paths (/run/flannel, /opt/cni/bin, /etc/cni/net.d, /run/xtables.lock) are one
  node-private directory per node, bind-mounted at the same path in each node's mount
  namespace: nothing is written to this machine's /run, /opt or /etc;
* the CNI configuration names that subnet file; the pod network is the testbed's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from k8sdds.cni.base import (
    POD_CIDR,
    Argv,
    ClusterCni,
    Cni,
    Datapath,
    Detected,
    Image,
    Install,
    Reset,
    Routed,
    UpstreamManifest,
    Vxlan,
    WireGuard,
    named,
    where,
)

CONFIG_MAPS = (("kube-flannel", "kube-flannel-cfg"), ("kube-system", "kube-flannel-cfg"))
# datapath -> flanneld's Backend.Type
BACKENDS = {"flannel-vxlan": "vxlan", "flannel-hostgw": "host-gw",
            "flannel-wireguard": "wireguard"}

DATAPATHS = (
    Datapath("flannel-hostgw", "Flannel host-gw: a route to each pod CIDR via its node",
             "none (routed)", 1500, False, wiring=Routed()),
    Datapath("flannel-vxlan", "Flannel vxlan: flannel.1, VNI 1, UDP 8472, static FDB",
             "VXLAN", 1450, False, kernel_links=("vxlan",),
             wiring=Vxlan("flannel.1", 1, 8472, 1450, "0e:6b:64:00:01")),
    Datapath("flannel-wireguard", "Flannel wireguard: pod CIDRs routed through a "
             "WireGuard device per node", "WireGuard", 1420, False,
             encryption="WireGuard (ChaCha20-Poly1305)", unencrypted="flannel-vxlan",
             wiring=WireGuard()),
)


def _net_conf(docs: list[dict], network: str, backend: str) -> dict | None:
    """Set the pod network and backend in kube-flannel-cfg's net-conf.json; the ConfigMap."""
    for doc in docs:
        if doc.get("kind") == "ConfigMap" and doc["metadata"]["name"] == "kube-flannel-cfg":
            net = json.loads(doc["data"]["net-conf.json"])
            net["Network"] = network
            net["Backend"] = {**net.get("Backend", {}), "Type": backend}
            doc["data"]["net-conf.json"] = json.dumps(net, indent=2)
            return doc
    return None


def adapt(install: Install, docs: list[dict]) -> list[dict]:
    """kubeadm: the install's backend and pod network."""
    _net_conf(docs, install.pod_cidr, install.options["backend"])
    return docs


def url_steps(install: Install, kubectl: Argv) -> list[Argv]:
    """--manifest-url: the published manifest runs vxlan; another backend is patched in."""
    if install.options["backend"] == "vxlan":
        return []
    conf = json.dumps({"Network": install.pod_cidr, "EnableNFTables": False,
                       "Backend": {"Type": install.options["backend"]}})
    return [(*kubectl, "-n", "kube-flannel", "patch", "configmap", "kube-flannel-cfg",
             "--type", "merge", "-p", json.dumps({"data": {"net-conf.json": conf}})),
            (*kubectl, "-n", "kube-flannel", "rollout", "restart",
             "daemonset/kube-flannel-ds")]


HOST_PATHS = {"/run/flannel": "flannel", "/opt/cni/bin": "cni-bin", "/etc/cni/net.d": "net.d",
              "/run/xtables.lock": "xtables.lock"}


def testbed_adapt(docs: list[dict], datapath: str, view: Path, network: str,
                  workers: int) -> list[dict]:
    """The upstream manifest's objects, adapted to the testbed (see the module's text)."""
    cm = _net_conf(docs, network, BACKENDS[datapath])
    if cm is not None:
        cni = json.loads(cm["data"]["cni-conf.json"])
        for plugin in cni["plugins"]:
            if plugin["type"] == "flannel":
                plugin["subnetFile"] = str(view / HOST_PATHS["/run/flannel"] / "subnet.env")
        cm["data"]["cni-conf.json"] = json.dumps(cni, indent=2)
    return docs


def detect(ds: Mapping, config_maps: Mapping[tuple[str, str], Mapping]) -> Detected | None:
    text = named(ds)
    if "flannel" not in text or "kube-router" in text:
        return None
    mode = ""
    for key in CONFIG_MAPS:
        data = (config_maps.get(key) or {}).get("data") or {}
        try:
            mode = str(json.loads(data.get("net-conf.json", ""))["Backend"]["Type"]).lower()
            break
        except (ValueError, KeyError, TypeError):
            continue
    found = {"extension": "flannel-vxlan", **{v: k for k, v in BACKENDS.items()}}
    return Detected(found.get(mode, "flannel-vxlan"), f"flannel ({mode or 'vxlan, by default'})",
                    where(ds))


CNI = Cni(
    "flannel", DATAPATHS,
    manifest=UpstreamManifest(
        "kube-flannel.yml", "e875824be2f552b45711dbda91af81b17eb961d00025d914d9fef18fad8f09c0",
        "https://github.com/flannel-io/flannel/releases/download/v0.28.9/kube-flannel.yml"),
    installs=(Install("flannel-vxlan", POD_CIDR, "flannel-vxlan", {"backend": "vxlan"}),
              Install("flannel-hostgw", POD_CIDR, "flannel-hostgw", {"backend": "host-gw"})),
    adapt=adapt, url_steps=url_steps, detect=detect, config_maps=CONFIG_MAPS,
    images=(
        # flanneld on Debian with iptables and iproute2, as upstream's alpine image
        Image("ghcr.io/flannel-io/flannel", "flanneld",
              {"/opt/bin/flanneld": "flanneld", "/opt/bin/install-conf": "flannel-install-conf"},
              apt=("iptables", "iproute2", "ca-certificates"),
              entrypoint=("/opt/bin/flanneld",)),
        Image("ghcr.io/flannel-io/flannel-cni-plugin", "flannel-cni",
              {"/flannel": "flannel-cni"}, tag_of=lambda v: "",
              note="flannel's CNI plugin from containernetworking/plugins (the version the Go "
                   "module proxy has), under the manifest's name"),
    ),
    testbed=ClusterCni(
        datapaths=("flannel-vxlan", "flannel-hostgw"),
        binaries=("flanneld", "flannel-install-conf", "flannel-cni"),
        daemonset=("kube-flannel", "kube-flannel-ds"), host_paths=HOST_PATHS,
        adapt=testbed_adapt),
    reset=Reset(files=("/run/flannel", "/opt/cni/bin/flannel"), links=("flannel.1",),
                chains=("FLANNEL-",),
                # host-gw's routes to the other nodes' pod subnets (proto boot, as flanneld
                # adds them; a LAN's own route is proto kernel or dhcp and stays)
                routes=(("ip", "route", "flush", "root", POD_CIDR, "proto", "boot"),)),
    aliases={"flannel": "flannel-vxlan", "flannel-vxlan": "flannel-vxlan",
             "flannel-hostgw": "flannel-hostgw", "hostgw": "flannel-hostgw"},
)

