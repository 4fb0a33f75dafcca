"""kube-router: pod CIDRs routed between nodes, learnt over BGP; the same packet path as
flannel host-gw (its kube-bridge is the pods' bridge)."""

from __future__ import annotations

from collections.abc import Mapping

from k8sdds.cni.base import Cni, Datapath, Detected, Install, Manifest, Reset, Routed, named, where

POD_CIDR = "10.244.0.0/16"


def detect(ds: Mapping, config_maps: Mapping[tuple[str, str], Mapping]) -> Detected | None:
    return Detected("kube-router", "kube-router", where(ds)) if "kube-router" in named(ds) else None


CNI = Cni(
    "kube-router",
    (Datapath("kube-router", "kube-router: pod CIDRs routed via node addresses (learnt "
              "by BGP; the same packet path as host-gw)", "none (routed)", 1500, False,
              wiring=Routed()),),
    manifest=Manifest(
        "kubeadm-kuberouter.yaml",
        "847b9b7a47c31d8e10149f5b4d94c78ea214d1c1d70df1640744ae21b0b9121a",
        "https://raw.githubusercontent.com/cloudnativelabs/kube-router/v2.4.0/daemonset/"
        "kubeadm-kuberouter.yaml",
        pins={"docker.io/cloudnativelabs/kube-router":
              "docker.io/cloudnativelabs/kube-router:v2.4.0"}),
    installs=(Install("kube-router", POD_CIDR, "kube-router"),),
    detect=detect,
    reset=Reset(links=("kube-bridge", "kube-dummy-if")),
    aliases={"kuberouter": "kube-router", "kube-router": "kube-router"},
)
