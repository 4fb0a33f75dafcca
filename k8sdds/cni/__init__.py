"""Every CNI k8sdds knows, one module each exporting one record (`CNI`, see base.py). The tables
the rest of k8sdds reads are views of those records: the datapaths (`model.DATAPATHS`), the
`cluster init --cni` choices, detection, what `cluster reset` removes, the names K8sDDS
data folders use. Adding a CNI is one module here, named in `CNIS`, plus its manifest."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from k8sdds.cni import base, calico, cilium, flannel, host, kube_router, weave
from k8sdds.cni.base import Cni, Datapath, Detected, Plan

CNIS: dict[str, Cni] = {c.name: c for c in (
    host.CNI, flannel.CNI, kube_router.CNI, weave.CNI, calico.CNI, cilium.CNI)}

UNKNOWN = Datapath("unknown", "a CNI k8sdds does not recognise", "unknown", 1450, False)
DATAPATHS: dict[str, Datapath] = {
    **{d.name: d for c in CNIS.values() for d in c.datapaths}, UNKNOWN.name: UNKNOWN}
# the datapaths a k8sdds command takes where none is given: the host baseline; the testbed
# cluster's pod network (`testbed up --kubernetes`); the path matrix's (`k8sdds baseline`)
CLUSTER_DEFAULT = "flannel-hostgw"
BASELINE_DEFAULT = (host.HOST_NETWORK, "flannel-hostgw", "flannel-vxlan")
# the datapath -> the CNI it belongs to
OWNER: dict[str, Cni] = {d.name: c for c in CNIS.values() for d in c.datapaths}
# `cluster init --cni` choices
PLANS: dict[str, Plan] = {i.name: Plan(c, i) for c in CNIS.values() for i in c.installs}
# what K8sDDS data folders call a CNI -> datapath
ALIASES: dict[str, str] = {k: v for c in CNIS.values() for k, v in c.aliases.items()}

# the ConfigMap that names the datapath of a testbed cluster's emulated wiring
MARKER = ("kube-system", "k8sdds-datapath")
# where Debian's containernetworking-plugins puts the plugins (the testbed's kubelets and
# `cluster install` link them from there)
DEBIAN_CNI = "/usr/lib/cni"
CONFIG_MAPS: tuple[tuple[str, str], ...] = (
    *(key for c in CNIS.values() for key in c.config_maps), MARKER)


def detect(daemonsets: Iterable[Mapping], config_maps: Mapping[tuple[str, str], Mapping]
           ) -> Detected:
    """The cluster's CNI: the first DaemonSet a CNI's rule recognises; else the testbed's
    marker; else unknown. Pure: the API's objects as dicts in."""
    for ds in daemonsets:
        for cni in CNIS.values():
            if cni.detect and (found := cni.detect(ds, config_maps)):
                return found
    marker = (config_maps.get(MARKER) or {}).get("data") or {}
    if marker.get("datapath"):  # a k8sdds testbed cluster whose pods ride its own wiring
        return Detected(str(marker["datapath"]), f"{marker['datapath']}, emulated wiring of a "
                        "k8sdds testbed (no CNI DaemonSet)", "/".join(MARKER))
    known = ", ".join(c.name for c in CNIS.values() if c.detect)
    return Detected("unknown", f"no known CNI DaemonSet ({known}) found")


def tunnel_ports() -> tuple[int, ...]:
    """The UDP ports of every tunnel a wiring uses (VXLAN, the L2 segments', WireGuard's,
    Cilium's)."""
    ports = []
    for d in DATAPATHS.values():
        w = d.wiring
        if isinstance(w, (base.Vxlan, base.L2Segment)) or (isinstance(w, base.Ebpf)
                                                           and w.tunnel):
            ports.append(w.port)
        if isinstance(w, base.WireGuard) or (isinstance(w, base.L2Segment) and w.encrypted):
            ports.append(base.TUNNEL.port)
    return tuple(sorted(set(ports)))


def reset_files() -> tuple[str, ...]:
    """Every CNI's files on a host, for `cluster reset`."""
    return tuple(f for c in CNIS.values() for f in c.reset.files)


def reset_links() -> tuple[str, ...]:
    return ("cni0", *(x for c in CNIS.values() for x in c.reset.links))


def reset_chains() -> tuple[str, ...]:
    return tuple(x for c in CNIS.values() for x in c.reset.chains)


def reset_routes() -> tuple[tuple[str, ...], ...]:
    return tuple(r for c in CNIS.values() for r in c.reset.routes)


def reset_ipsets() -> tuple[str, ...]:
    return tuple(x for c in CNIS.values() for x in c.reset.ipsets)


def reset_comments() -> tuple[str, ...]:
    return tuple(x for c in CNIS.values() for x in c.reset.comments)
