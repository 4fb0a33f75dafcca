"""kube-router: pod CIDRs routed between nodes, learnt over BGP (its gobgp speaker peers with
every node); the pods' bridge is kube-bridge; its network policy chains and ipsets are on every
forwarded packet's path.

Real on the testbed cluster: the upstream kubeadm DaemonSet in an image built here from
kube-router's Go module. What differs from the upstream manifest there, and why
(its `HOST_PATHS`, nothing else):
* the image is the one built here (no registry), kube-router v2.1.0: the newest the Go module
  proxy serves (v2.2.0 and later are refused with 403), under v2.4.0's manifest, whose
  arguments v2.1.0 takes alike;
* the host paths (/etc/cni/net.d, /opt, /lib/modules, /run/xtables.lock and the kubeconfig
  path) are one node-private directory per node, as flannel's are: nothing is written to this
  machine's /etc, /opt or /run;
* nothing else: its service proxy is off in that manifest (kube-proxy serves Services, as on
  a kubeadm cluster), and its IPIP overlay is never used, since every node is in one subnet.
"""

from __future__ import annotations

from collections.abc import Mapping

from k8sdds.cni.base import (
    POD_CIDR,
    ClusterCni,
    Cni,
    Datapath,
    Detected,
    Image,
    Install,
    Reset,
    Routed,
    UpstreamManifest,
    named,
    where,
)

# the newest kube-router the Go module proxy serves (the image k8sdds builds and pins)
VERSION = "v2.1.0"


def detect(ds: Mapping, config_maps: Mapping[tuple[str, str], Mapping]) -> Detected | None:
    return Detected("kube-router", "kube-router", where(ds)) if "kube-router" in named(ds) else None


HOST_PATHS = {"/etc/cni/net.d": "net.d", "/run/xtables.lock": "xtables.lock",
              "/opt": "kube-router-opt", "/lib/modules": "kube-router-modules",
              "/var/lib/kube-router/kubeconfig": "kube-router-kubeconfig"}



CNI = Cni(
    "kube-router",
    (Datapath("kube-router", "kube-router: pod CIDRs routed via node addresses (learnt "
              "by BGP), its network policy chains on the forward path", "none (routed)",
              1500, False, wiring=Routed(firewall=True)),),
    manifest=UpstreamManifest(
        "kubeadm-kuberouter.yaml",
        "847b9b7a47c31d8e10149f5b4d94c78ea214d1c1d70df1640744ae21b0b9121a",
        "https://raw.githubusercontent.com/cloudnativelabs/kube-router/v2.4.0/daemonset/"
        "kubeadm-kuberouter.yaml",
        pins={"docker.io/cloudnativelabs/kube-router":
              f"docker.io/cloudnativelabs/kube-router:{VERSION}"}),
    installs=(Install("kube-router", POD_CIDR, "kube-router"),),
    detect=detect,
    images=(
        # kube-router on Debian with what upstream's alpine image gives it: iptables, ipset,
        # iproute2, conntrack (the CNI plugins are the node's, as on a kubeadm host)
        Image("docker.io/cloudnativelabs/kube-router", "kube-router",
              {"/usr/local/bin/kube-router": "kube-router"},
              apt=("iptables", "ipset", "iproute2", "conntrack", "ca-certificates"),
              entrypoint=("/usr/local/bin/kube-router",)),
    ),
    testbed=ClusterCni(datapaths=("kube-router",), binaries=("kube-router",),
                       daemonset=("kube-system", "kube-router"), host_paths=HOST_PATHS),
    # its chains start KUBE- (kubeadm's reset list has them); its routes to the other nodes'
    # pod CIDRs are its own protocol's (17), its ipsets named by its network policy controller
    reset=Reset(files=("/var/lib/kube-router",),
                links=("kube-bridge", "kube-dummy-if", "kube-tunnel-if"),
                routes=(("ip", "route", "flush", "root", POD_CIDR, "proto", "17"),),
                ipsets=("kube-router-", "KUBE-SRC-", "KUBE-DST-", "inet6:kube-router-",
                        "inet6:KUBE-SRC-", "inet6:KUBE-DST-"),
                # its ACCEPT rules in FORWARD (pods' bridge, node ports)
                comments=("allow outbound node port traffic on node interface",
                          "allow inbound traffic to pods", "allow outbound traffic from pods")),
    aliases={"kuberouter": "kube-router", "kube-router": "kube-router"},
)
