"""The real flannel on a testbed cluster: flanneld as the upstream kube-flannel DaemonSet
(pinned manifest shipped in k8sdds/manifests), in images built here from flannel's Go module,
with the flannel CNI plugin. Routes, the VXLAN device and the node annotations are flanneld's
own, so CNI detection, datapath and addressing are what a real flannel cluster has.

What differs from the upstream manifest, and why (`manifest()` does it, nothing else):
* the images are the ones built here (no registry);
* the host paths (/run/flannel, /opt/cni/bin, /etc/cni/net.d, /run/xtables.lock) are one
  node-private directory per node, bind-mounted at the same path in each node's mount
  namespace: nothing is written to this machine's /run, /opt or /etc;
* the CNI configuration names that subnet file; the pod network is the testbed's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from k8sdds.errors import TestbedError

# flannel v0.28.9's Documentation/kube-flannel.yml (its release asset), as published
MANIFEST = Path(__file__).resolve().parents[2] / "manifests" / "kube-flannel.yml"
MANIFEST_SHA256 = "e875824be2f552b45711dbda91af81b17eb961d00025d914d9fef18fad8f09c0"
BACKENDS = {"flannel-vxlan": "vxlan", "flannel-hostgw": "host-gw"}  # datapath -> Backend.Type
BINARIES = ("flanneld", "flannel-install-conf", "flannel-cni")
# the node view: what a hostPath of the manifest becomes (a directory under the node view)
HOST_PATHS = {"/run/flannel": "flannel", "/opt/cni/bin": "cni-bin", "/etc/cni/net.d": "net.d",
              "/run/xtables.lock": "xtables.lock"}
INSTALL_APT = ("apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
               "--no-install-recommends iptables iproute2 ca-certificates "
               "&& rm -rf /var/lib/apt/lists/*")


@dataclass(frozen=True)
class Tags:
    """The names of the images built here: flanneld's, and the CNI plugin's."""

    flannel: str
    plugin: str

    def for_image(self, upstream: str) -> str:
        """What an image of the upstream manifest becomes."""
        return self.plugin if "cni-plugin" in upstream else self.flannel


@dataclass(frozen=True)
class Images:
    """The archives the nodes import, and their names."""

    archives: tuple[Path, ...]
    tags: Tags


def version(binaries: Path, name: str) -> str:
    """The version a cached binary was built at (its link's target: <name>-<version>)."""
    target = os.readlink(binaries / name) if (binaries / name).is_symlink() else name
    return target.removeprefix(f"{name}-") if target != name else "unknown"


def missing(binaries: Path) -> str | None:
    """Why the real flannel cannot run here, or None."""
    lacking = [b for b in BINARIES if not (binaries / b).exists()]
    if lacking:
        return (f"{', '.join(lacking)} not built in {binaries} (run .ci/k8s-test-binaries)")
    from k8sdds.results.files import sha256

    try:
        if sha256(MANIFEST) != MANIFEST_SHA256:
            return f"{MANIFEST} is not the pinned flannel manifest (its digest differs)"
    except OSError as exc:
        return f"{MANIFEST}: {exc.strerror}"
    return None


def images(binaries: Path, say: Callable[[str], None] = lambda _: None) -> Images:
    """flanneld's image (Debian with iptables and iproute2, as upstream's alpine one) and the
    CNI plugin's (busybox cp and the plugin), built once and cached."""
    from k8sdds.images.build import busybox_image

    fl, cni = version(binaries, "flanneld"), version(binaries, "flannel-cni")
    flannel_tag = f"localhost/k8sdds/flannel:{fl}"
    plugin_tag = f"localhost/k8sdds/flannel-cni-plugin:{cni}"
    say(f"flannel {fl} image (cached after the first build)")
    flannel = flannel_image(flannel_tag, binaries, say)
    plugin = busybox_image(plugin_tag, {"/flannel": binaries / "flannel-cni"}, [],
                           "flannel-cni-plugin")
    return Images((flannel, plugin), Tags(flannel_tag, plugin_tag))


def flannel_image(tag: str, binaries: Path, say: Callable[[str], None] = lambda _: None
                  ) -> Path:
    """flanneld and install-conf on Debian with iptables and iproute2, named `tag`."""
    from k8sdds.images.build import BuildOptions, assemble
    from k8sdds.images.dockerfile import Recipe

    return assemble(Recipe("bookworm", (INSTALL_APT,)), f"flannel {INSTALL_APT}",
                    BuildOptions(Path("-"), None, tag=tag), say,
                    files={"/opt/bin/flanneld": binaries / "flanneld",
                           "/opt/bin/install-conf": binaries / "flannel-install-conf"},
                    entrypoint=["/opt/bin/flanneld"], name="flannel")


def manifest(text: str, datapath: str, view: Path, tags: Tags, network: str) -> list[dict]:
    """The upstream manifest's objects, adapted to the testbed (see the module's text): pure."""
    import yaml

    if datapath not in BACKENDS:
        raise TestbedError(f"flannel runs {', '.join(BACKENDS)} here, not {datapath}")
    docs = [d for d in yaml.safe_load_all(text) if d]
    for doc in docs:
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "kube-flannel-cfg":
            net = json.loads(doc["data"]["net-conf.json"])
            net["Network"] = network
            net["Backend"] = {**net.get("Backend", {}), "Type": BACKENDS[datapath]}
            doc["data"]["net-conf.json"] = json.dumps(net, indent=2)
            cni = json.loads(doc["data"]["cni-conf.json"])
            for plugin in cni["plugins"]:
                if plugin["type"] == "flannel":
                    plugin["subnetFile"] = str(view / HOST_PATHS["/run/flannel"] / "subnet.env")
            doc["data"]["cni-conf.json"] = json.dumps(cni, indent=2)
        elif doc["kind"] == "DaemonSet":
            spec = doc["spec"]["template"]["spec"]
            for c in spec.get("initContainers", []) + spec["containers"]:
                c["image"] = tags.for_image(c["image"])
                c["imagePullPolicy"] = "IfNotPresent"
            for volume in spec["volumes"]:
                host = volume.get("hostPath")
                if host and host["path"] in HOST_PATHS:
                    host["path"] = str(view / HOST_PATHS[host["path"]])
    return docs


def apply(kubeconfig: Path, docs: list[dict]) -> None:
    """Create the manifest's objects, as `kubectl apply` of a fresh cluster would."""
    from kubernetes import client, config, utils

    api = config.new_client_from_config(str(kubeconfig))
    for doc in docs:
        try:
            utils.create_from_dict(api, doc)
        except utils.FailToCreateError as exc:
            reasons = "; ".join(str(getattr(e, "reason", e)) for e in exc.api_exceptions)
            raise TestbedError(f"flannel: {doc['kind']} {doc['metadata']['name']}: "
                               f"{reasons}") from None
    client.ApiClient.close(api)
