"""The CNI records (k8sdds/cni): one owner per CNI, and every table of k8sdds a view of them
that agrees with the records' own manifests."""

from __future__ import annotations

import pkgutil

import pytest

from k8sdds import cni, model
from k8sdds.cni import base, manifests


def test_every_cni_module_is_listed_and_every_datapath_has_one_owner():
    modules = {m.name for m in pkgutil.iter_modules(cni.__path__)} - {"base", "manifests"}
    owners = {c.name: c for c in cni.CNIS.values()}
    for name in modules:
        module = __import__(f"k8sdds.cni.{name}", fromlist=["CNI"])
        assert owners.get(module.CNI.name) is module.CNI, f"k8sdds/cni/{name}.py is not in CNIS"
    names = [d.name for c in cni.CNIS.values() for d in c.datapaths]
    assert len(names) == len(set(names))  # a datapath belongs to one CNI
    assert model.DATAPATHS is cni.DATAPATHS and list(model.DATAPATHS) == [*names, "unknown"]
    assert all(cni.OWNER[d] is c for c in cni.CNIS.values() for d in (x.name for x in c.datapaths))


@pytest.mark.parametrize("name", sorted(cni.PLANS))
def test_each_install_is_detected_as_its_datapath_from_its_own_manifest(name):
    """What `cluster init --cni` applies is what the kubernetes backend then detects."""
    plan = cni.PLANS[name]
    assert plan.install.datapath in cni.DATAPATHS
    objs = base.objects(manifests.adapted(plan, manifests.shipped(plan.cni)))
    sets = [o for o in objs if o.get("kind") == "DaemonSet"]
    maps = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objs
            if o.get("kind") == "ConfigMap"}
    assert cni.detect(sets, maps).datapath == plan.install.datapath


def test_weave_told_no_fast_datapath_is_detected_in_its_sleeve_mode(tmp_path):
    """The testbed runs Weave with WEAVE_NO_FASTDP (no Open vSwitch here): detection says
    sleeve, which the kubernetes backend's fingerprint gives as the CNI's mode; Weave's own
    published manifest, as `cluster init` applies it, does not say it."""
    from k8sdds.cni import weave

    record = cni.CNIS["weave"]
    upstream = manifests.documents(manifests.shipped(record))
    sets = [o for o in base.objects(upstream) if o.get("kind") == "DaemonSet"]
    assert record.detect(sets[0], {}).mode == ""
    adapted = weave.testbed_adapt(upstream, "weave", tmp_path, "10.244.0.0/16", 2)
    sets = [o for o in base.objects(adapted) if o.get("kind") == "DaemonSet"]
    found = record.detect(sets[0], {})
    assert (found.datapath, found.mode) == ("weave", "sleeve (the router in user space, "
                                                      "UDP 6783)")


def test_the_emulated_wiring_covers_every_datapath_that_has_one():
    from k8sdds.testbed.wiring.kinds import WIRING

    # what the emulated testbed wires (docs/explanation/datapaths.md), written out
    assert set(WIRING) == {"host", "flannel-hostgw", "flannel-vxlan", "flannel-wireguard",
                           "kube-router", "weave", "weave-encrypted", "calico-vxlan",
                           "calico-ipip", "cilium-vxlan", "cilium-native"}
    wired = {d.name for d in cni.DATAPATHS.values() if d.wiring is not None or d.host_network}
    assert set(WIRING) == wired


def test_each_wiring_kind_has_its_module_as_the_architecture_page_says():
    """docs/architecture.md: a new wiring kind is its record class in cni/base.py and its
    module in testbed/wiring/, named in wiring.kinds.MODULES. Every class of base.Wiring has
    exactly one module, each module sits in that folder and names its class."""
    import typing
    from pathlib import Path

    from k8sdds.testbed.wiring import kinds

    classes = set(typing.get_args(base.Wiring))
    assert {c.__name__ for c in classes} == {"Routed", "Vxlan", "Ipip", "WireGuard",
                                             "L2Segment", "Ebpf"}
    assert set(kinds.BY_KIND) == classes
    assert len(kinds.MODULES) == len(classes)
    folder = Path(kinds.__file__).parent
    for module in kinds.MODULES:
        assert Path(module.__file__).parent == folder, module.__name__
        assert module.KIND in classes and callable(module.wiring)
    assert "`wiring.kinds.MODULES`" in (Path(__file__).parent.parent
                                         / "docs/architecture.md").read_text()


def test_a_wiring_says_what_this_machine_lacks_for_it(monkeypatch):
    """Each wiring kind says why it cannot be made here: kube-router's firewall without
    iptables-restore or ipset names both packages; the datapaths of other kinds do not
    ask for them."""
    import shutil

    from k8sdds.testbed.wiring.kinds import datapath_unavailable

    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "ipset" else real(tool))
    assert datapath_unavailable(model.datapath("kube-router")) == (
        "its firewall rules need ipset (apt-get install --no-install-recommends iptables "
        "ipset)")
    assert datapath_unavailable(model.datapath("flannel-hostgw")) is None


def _runs(record) -> set[str]:
    """The image repositories the record's upstream manifest (shipped, pinned) runs."""
    from k8sdds.images.kubernetes import split

    return {split(c["image"])[0] for o in base.objects(manifests.documents(
        manifests.shipped(record))) for c in base.containers(o)}


def test_every_image_an_upstream_manifest_runs_can_be_built_here():
    """`cluster images --build` makes every image the flannel, kube-router and Weave Net
    manifests run: read from the manifests, not from the records that list the builds."""
    from k8sdds.images.kubernetes import BUILDERS

    for name in ("flannel", "kube-router", "weave"):
        ran = _runs(cni.CNIS[name])
        assert ran, name
        assert ran <= set(BUILDERS), (name, ran - set(BUILDERS))
    for record in cni.CNIS.values():
        for image in record.images:
            assert image.repository in _runs(record), image.repository
            assert set(image.files.values()) <= {image.binary, *record.testbed.binaries}


# host directories an upstream manifest mounts that are not the CNI's own state: the
# iptables lock, D-Bus's machine id, the shared CNI state (`cluster reset` removes
# /var/lib/cni whatever the CNI), the named network namespaces
SHARED_HOST_PATHS = ("/run/xtables.lock", "/var/lib/dbus", "/var/lib/cni", "/run/netns")


def test_cluster_reset_removes_the_state_each_upstream_manifest_mounts():
    """Every directory of its own a CNI's DaemonSet mounts from the host under /var/lib,
    /run, /var/run or /var/log (read from the upstream manifest) is one `cluster reset`
    removes."""
    import re

    from k8sdds.cluster import kubeadm

    state = re.compile(r"^/(?:var/lib|run|var/log)/[^/]+")
    removed = [f.replace("/var/run/", "/run/", 1) for f in kubeadm.RESET_FILES
               if f.startswith("/")]  # /var/run is /run
    checked = set()
    for record in cni.CNIS.values():
        if record.manifest is None:  # the host: nothing to install
            continue
        for o in base.objects(manifests.documents(manifests.shipped(record))):
            spec = (o.get("spec") or {}).get("template", {}).get("spec", {})
            for v in spec.get("volumes") or []:
                path = (v.get("hostPath") or {}).get("path", "").replace("/var/run/", "/run/", 1)
                found = state.match(path)
                if not found or path.startswith(SHARED_HOST_PATHS):
                    continue
                checked.add(found.group(0))
                assert any(found.group(0) == f or found.group(0).startswith(f + "/")
                           for f in removed), (record.name, path)
    assert {"/run/flannel", "/var/lib/kube-router", "/var/lib/weave",
            "/var/lib/calico", "/run/cilium"} <= checked
    listing = "kube-router-pod-subnets\nKUBE-SRC-ABC\nweave-k?Z;25^M}|1s7P3|H9i;*;MhG\nmine\n"
    assert kubeadm.cluster_sets(listing) == ["kube-router-pod-subnets", "KUBE-SRC-ABC",
                                             "weave-k?Z;25^M}|1s7P3|H9i;*;MhG"]


def test_the_testbeds_real_cnis_are_the_records_with_a_testbed_part(tmp_path):
    from k8sdds.testbed.kube import pod_network as testbed_cni

    assert set(testbed_cni.REAL) == {d for c in cni.CNIS.values() if c.testbed
                                     for d in c.testbed.datapaths}
    real = testbed_cni.choose("flannel-vxlan", "emulated", tmp_path)
    assert not real.real  # emulated asked for: the wiring, whatever is built


def test_k8sdds_data_names_map_to_datapaths():
    assert {cni.ALIASES[n] for n in ("flannel", "hostgw", "kuberouter", "weavenet",
                                     "weavenet-encrypted", "hostnetwork")} == {
        "flannel-vxlan", "flannel-hostgw", "kube-router", "weave", "weave-encrypted", "host"}
    assert set(cni.ALIASES.values()) <= set(cni.DATAPATHS)


def test_the_tunnel_ports_are_the_projects_own():
    """Each tunnel's UDP port as its project documents it: VXLAN's IANA 4789 (calico), Weave
    Net's 6784, the Linux kernel's VXLAN default 8472 (flannel), WireGuard's 51820; the
    testbed's untracked-traffic rule names exactly these."""
    from k8sdds.testbed import netfilter

    assert cni.tunnel_ports() == (4789, 6784, 8472, 51820)
    assert "udp dport { 4789, 6784, 8472, 51820 } notrack" in netfilter.UNTRACKED
