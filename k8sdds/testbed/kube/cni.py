"""What carries a testbed cluster's pods: a real CNI (flannel: flanneld and its plugin) or the
emulated wiring of the datapath (the testbed's routes or VXLAN, Debian's bridge plugin on each
node's cni0). A registry by datapath; `choose` says which, and why when it falls back."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from k8sdds.errors import TestbedError, UserError
from k8sdds.testbed.kube import flannel
from k8sdds.testbed.kube import node as agent

if TYPE_CHECKING:
    from k8sdds.testbed.testbed import Node

# where the deployment's CNI detection reads the datapath of an emulated wiring
MARKER = ("kube-system", "k8sdds-datapath")
MODES = ("auto", "real", "emulated")


@dataclass
class Cni:
    """The emulated wiring of `datapath`; subclasses run a real CNI instead."""

    datapath: str
    fallback: str = ""  # why the real CNI was not used (auto), shown and recorded
    archives: list[Path] = field(default_factory=list)  # images the nodes import

    real = False
    pods_in = ""  # the namespace of the CNI's own pods, whose usage a run reads

    def describe(self) -> str:
        note = f" ({self.fallback})" if self.fallback else ""
        return f"{self.datapath}, emulated wiring (k8sdds routes, bridge plugin){note}"

    def wires_testbed(self) -> bool:
        """Whether the testbed wires the datapath (else the CNI does)."""
        return True

    def prepare(self, binaries: Path, say: Callable[[str], None]) -> None:
        """Build (or find cached) what the CNI's pods need, before any node starts."""

    def configure(self, node: Node, files: agent.NodeFiles) -> None:
        (files.own("net.d") / "10-k8sdds.conflist").write_text(
            agent.cni_config(node.pod_cidr, node.gateway, 1500, files))

    def start(self, kubeconfig: Path, view: Path) -> None:
        """Once the nodes are registered: what the cluster learns of its network (`view`:
        the node view, where a DaemonSet's host paths point)."""
        from kubernetes import client, config

        api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
        api.create_namespaced_config_map(MARKER[0], {
            "metadata": {"name": MARKER[1], "labels": {"app.kubernetes.io/managed-by": "k8sdds"}},
            "data": {"datapath": self.datapath, "wiring": "emulated"}})

    def wait(self, kubeconfig: Path, timeout: float) -> None:
        """Until the CNI carries pods."""


@dataclass
class Flannel(Cni):
    """flanneld as the upstream DaemonSet, with the flannel CNI plugin (see flannel.py)."""

    tags: flannel.Tags | None = None  # the images built here, once prepared
    real = True
    pods_in = "kube-flannel"

    def describe(self) -> str:
        return (f"{self.datapath}, flannel {self.version} (flanneld DaemonSet "
                f"kube-flannel/kube-flannel-ds, flannel CNI plugin)")

    @property
    def version(self) -> str:
        from k8sdds.testbed.kube.cluster import binaries

        return flannel.version(binaries(), "flanneld")

    def wires_testbed(self) -> bool:
        return False

    def prepare(self, binaries: Path, say: Callable[[str], None]) -> None:
        built = flannel.images(binaries, say)
        self.archives, self.tags = list(built.archives), built.tags

    def configure(self, node: Node, files: agent.NodeFiles) -> None:
        """Nothing: flannel's init containers write the CNI configuration."""

    def start(self, kubeconfig: Path, view: Path) -> None:
        from k8sdds.testbed.testbed import POD_NETWORK

        flannel.apply(kubeconfig, flannel.manifest(flannel.MANIFEST.read_text(), self.datapath,
                                                   view, self.tags, POD_NETWORK))

    def wait(self, kubeconfig: Path, timeout: float) -> None:
        """Until every flanneld is ready (its /readyz: the subnet lease and the backend),
        watching the DaemonSet's status."""
        from kubernetes import client, config, watch
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        api = client.AppsV1Api(config.new_client_from_config(str(kubeconfig)))
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            w = watch.Watch()
            try:
                for event in w.stream(api.list_namespaced_daemon_set, self.pods_in,
                                      field_selector="metadata.name=kube-flannel-ds",
                                      timeout_seconds=max(1, int(left)),
                                      _request_timeout=left + 10):
                    st = event["object"].status
                    if (st.desired_number_scheduled
                            and st.number_ready == st.desired_number_scheduled):
                        return
            except (ApiException, HTTPError):
                continue  # the watch broke: watch again while time is left
            finally:
                w.stop()
        raise TestbedError(f"flannel not ready within {timeout:g} s (kubectl -n kube-flannel "
                           "logs ds/kube-flannel-ds)")


REAL = {name: Flannel for name in flannel.BACKENDS}


def choose(datapath: str, mode: str, binaries: Path) -> Cni:
    """The CNI for `datapath`: `real` (refused when it cannot run here), `emulated`, or
    `auto` (real where it can run here, else emulated with the reason)."""
    if mode not in MODES:
        raise UserError(f"--cni {mode}: use one of {', '.join(MODES)}")
    kind = REAL.get(datapath)
    if mode == "emulated":
        return Cni(datapath)
    if kind is None:
        if mode == "real":
            raise UserError(f"--cni real: k8sdds runs no real CNI for {datapath} here (real: "
                            f"{', '.join(REAL)}); use --cni emulated")
        return Cni(datapath, fallback=f"no real CNI for {datapath} here")
    reason = flannel.missing(binaries)
    if reason:
        if mode == "real":
            raise UserError(f"--cni real: {reason}")
        return Cni(datapath, fallback=f"real flannel unavailable: {reason}")
    return kind(datapath)
