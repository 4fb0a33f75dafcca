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
    if plan.manifest is None:
        return  # installed by its own CLI: nothing to read here
    objs = base.objects(manifests.adapted(plan, manifests.shipped(plan.cni)))
    sets = [o for o in objs if o.get("kind") == "DaemonSet"]
    maps = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objs
            if o.get("kind") == "ConfigMap"}
    assert cni.detect(sets, maps).datapath == plan.install.datapath


def test_the_emulated_wiring_covers_every_datapath_that_has_one():
    from k8sdds.testbed.wiring import WIRING

    wired = {d.name for d in cni.DATAPATHS.values() if d.wiring is not None or d.host_network}
    assert set(WIRING) == wired
    assert {"host", "flannel-hostgw", "flannel-vxlan", "kube-router", "weave",
            "weave-encrypted", "calico-vxlan", "calico-ipip", "flannel-wireguard"} <= wired


def test_every_image_a_record_builds_is_one_its_manifest_runs():
    from k8sdds.images.kubernetes import BUILDERS, split

    for record in cni.CNIS.values():
        if not record.images:
            continue
        runs = {split(c["image"])[0] for o in base.objects(manifests.documents(
            manifests.shipped(record))) for c in base.containers(o)}
        for image in record.images:
            assert image.repository in runs, image.repository
            assert image.repository in BUILDERS  # `cluster images --build` can make it
            assert set(image.files.values()) <= {image.binary, *record.testbed.binaries}


def test_cluster_reset_removes_what_each_record_leaves():
    from k8sdds.cluster import kubeadm

    for record in cni.CNIS.values():
        assert set(record.reset.files) <= set(kubeadm.RESET_FILES)
        assert set(record.reset.links) <= set(kubeadm.LINKS)
        assert set(record.reset.chains) <= set(kubeadm.CHAINS)
        assert set(record.reset.routes) <= set(kubeadm.ROUTES)
        assert set(record.reset.ipsets) <= set(kubeadm.IPSETS)
        assert set(record.reset.comments) <= set(kubeadm.COMMENTS)
    listing = "kube-router-pod-subnets\nKUBE-SRC-ABC\nweave-k?Z;25^M}|1s7P3|H9i;*;MhG\nmine\n"
    assert kubeadm.cluster_sets(listing) == ["kube-router-pod-subnets", "KUBE-SRC-ABC",
                                             "weave-k?Z;25^M}|1s7P3|H9i;*;MhG"]


def test_the_testbeds_real_cnis_are_the_records_with_a_testbed_part(tmp_path):
    from k8sdds.testbed.kube import cni as testbed_cni

    assert set(testbed_cni.REAL) == {d for c in cni.CNIS.values() if c.testbed
                                     for d in c.testbed.datapaths}
    real = testbed_cni.choose("flannel-vxlan", "emulated", tmp_path)
    assert not real.real  # emulated asked for: the wiring, whatever is built


def test_k8sdds_data_names_map_to_datapaths():
    assert {cni.ALIASES[n] for n in ("flannel", "hostgw", "kuberouter", "weavenet",
                                     "weavenet-encrypted", "hostnetwork")} == {
        "flannel-vxlan", "flannel-hostgw", "kube-router", "weave", "weave-encrypted", "host"}
    assert set(cni.ALIASES.values()) <= set(cni.DATAPATHS)
