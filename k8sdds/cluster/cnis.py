"""The CNIs `k8sdds cluster init` brings up, as data: each one's pod network, its manifest
shipped with k8sdds (k8sdds/manifests, pinned to a release and checked by SHA-256), the
images that manifest runs, and what k8sdds changes in it (pure functions, no I/O but reading
the shipped file). Air-gapped hosts need nothing from the network: the manifest is copied to
the control plane and its images are loaded by `k8sdds cluster images`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from k8sdds.errors import UserError

MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"
CILIUM_VERSION = "1.17.4"


@dataclass(frozen=True)
class Cni:
    name: str
    pod_cidr: str
    manifest: str | None  # the file in k8sdds/manifests (None: the CNI's own installer)
    sha256: str | None
    url: str | None  # the same manifest where its project publishes it (--manifest-url)
    # upstream image -> the pinned one (manifests naming `latest` or no tag at all)
    pins: dict[str, str] = field(default_factory=dict)
    flannel_backend: str | None = None
    encrypted: bool = False  # weave-encrypted: a generated password in a Secret
    needs: tuple[str, ...] = ()  # programs the control plane needs


FLANNEL = ("kube-flannel.yml",
           "e875824be2f552b45711dbda91af81b17eb961d00025d914d9fef18fad8f09c0",
           "https://github.com/flannel-io/flannel/releases/download/v0.28.9/kube-flannel.yml")
WEAVE = ("weave-daemonset-k8s.yaml",
         "a2410c91152fdead60084a750d5041749e95350c038a9832e7dff71f85b52c9c",
         "https://github.com/weaveworks/weave/releases/download/v2.8.1/weave-daemonset-k8s.yaml")
WEAVE_PINS = {"weaveworks/weave-kube:latest": "weaveworks/weave-kube:2.8.1",
              "weaveworks/weave-npc:latest": "weaveworks/weave-npc:2.8.1"}

CNIS: dict[str, Cni] = {c.name: c for c in (
    Cni("flannel-vxlan", "10.244.0.0/16", *FLANNEL, flannel_backend="vxlan"),
    Cni("flannel-hostgw", "10.244.0.0/16", *FLANNEL, flannel_backend="host-gw"),
    Cni("kube-router", "10.244.0.0/16", "kubeadm-kuberouter.yaml",
        "847b9b7a47c31d8e10149f5b4d94c78ea214d1c1d70df1640744ae21b0b9121a",
        "https://raw.githubusercontent.com/cloudnativelabs/kube-router/v2.4.0/daemonset/"
        "kubeadm-kuberouter.yaml",
        pins={"docker.io/cloudnativelabs/kube-router":
              "docker.io/cloudnativelabs/kube-router:v2.4.0"}),
    Cni("weave", "10.32.0.0/12", *WEAVE, pins=WEAVE_PINS),
    Cni("weave-encrypted", "10.32.0.0/12", *WEAVE, pins=WEAVE_PINS, encrypted=True),
    Cni("calico", "192.168.0.0/16", "calico.yaml",
        "9a575859428b822a224dedafc4238555b6b0f910f2abf12983f20f871860914e",
        "https://raw.githubusercontent.com/projectcalico/calico/v3.29.3/manifests/calico.yaml"),
    Cni("cilium", "10.244.0.0/16", None, None, None, needs=("cilium",)),
)}
WEAVE_SECRET = "weave-passwd"


def shipped(cni: Cni) -> str:
    """The manifest as shipped, after its digest is checked."""
    import hashlib

    from k8sdds.guarded import read_bytes

    if cni.manifest is None:
        raise UserError(f"{cni.name} is installed by its own CLI; it has no manifest")
    path = MANIFESTS / cni.manifest
    data = read_bytes(path, "CNI manifest")
    got = hashlib.sha256(data).hexdigest()
    if got != cni.sha256:
        raise UserError(f"{path}: not the pinned {cni.name} manifest (sha256 {got}, expected "
                        f"{cni.sha256}); reinstall k8sdds")
    return data.decode()


def _objects(docs: list[dict]) -> list[dict]:
    """Every object, the items of a `List` included."""
    out = []
    for doc in docs:
        out += doc.get("items", []) if doc.get("kind") == "List" else [doc]
    return out


def _containers(obj: dict) -> list[dict]:
    spec = obj.get("spec", {}).get("template", {}).get("spec", {})
    return spec.get("initContainers", []) + spec.get("containers", [])


def adapt(cni: Cni, text: str) -> str:
    """The manifest as k8sdds applies it (YAML). Pure."""
    import yaml

    return yaml.safe_dump_all(adapted(cni, text), sort_keys=False)


def adapted(cni: Cni, text: str) -> list[dict]:
    """The manifest's documents as k8sdds applies them: images pinned and pulled only when
    absent (hosts with no registry run what `cluster images` loaded); flannel's backend;
    weave's password from its Secret. Pure."""
    import yaml

    docs = [d for d in yaml.safe_load_all(text) if d]
    for obj in _objects(docs):
        for c in _containers(obj):
            c["image"] = cni.pins.get(c["image"], c["image"])
            c["imagePullPolicy"] = "IfNotPresent"
            if cni.encrypted and c.get("name") == "weave":
                c["env"] = [*(c.get("env") or []), {
                    "name": "WEAVE_PASSWORD", "valueFrom": {"secretKeyRef": {
                        "name": WEAVE_SECRET, "key": WEAVE_SECRET}}}]
        if (cni.flannel_backend and obj.get("kind") == "ConfigMap"
                and obj["metadata"]["name"] == "kube-flannel-cfg"):
            net = json.loads(obj["data"]["net-conf.json"])
            net["Network"] = cni.pod_cidr
            net["Backend"] = {**net.get("Backend", {}), "Type": cni.flannel_backend}
            obj["data"]["net-conf.json"] = json.dumps(net, indent=2)
    return docs


def images(cni: Cni) -> list[str]:
    """The images the CNI's pods run (empty for a CNI installed by its own CLI)."""
    if cni.manifest is None:
        return []
    docs = adapted(cni, shipped(cni))
    return sorted({c["image"] for obj in _objects(docs) for c in _containers(obj)})


def url_steps(cni: Cni, kubectl: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The online way (--manifest-url): the published manifest applied by URL on the control
    plane, then what `adapt` would have changed, as patches."""
    steps: list[tuple[str, ...]] = [(*kubectl, "apply", "-f", cni.url or "")]
    if cni.flannel_backend and cni.flannel_backend != "vxlan":
        conf = json.dumps({"Network": cni.pod_cidr, "EnableNFTables": False,
                           "Backend": {"Type": cni.flannel_backend}})
        steps += [(*kubectl, "-n", "kube-flannel", "patch", "configmap", "kube-flannel-cfg",
                   "--type", "merge", "-p", json.dumps({"data": {"net-conf.json": conf}})),
                  (*kubectl, "-n", "kube-flannel", "rollout", "restart",
                   "daemonset/kube-flannel-ds")]
    if cni.encrypted:
        steps.append((*kubectl, "-n", "kube-system", "patch", "daemonset", "weave-net",
                      "--type", "json", "-p", json.dumps([{
                          "op": "add", "path": "/spec/template/spec/containers/0/env/-",
                          "value": {"name": "WEAVE_PASSWORD", "valueFrom": {"secretKeyRef": {
                              "name": WEAVE_SECRET, "key": WEAVE_SECRET}}}}])))
    return steps
