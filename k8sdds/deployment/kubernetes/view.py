"""What a cluster offers a run: its nodes (which are Ready workers, of which architecture)
and its CNI, read through the API."""

from __future__ import annotations

from k8sdds import cni
from k8sdds.cni.base import Detected
from k8sdds.deployment.kubernetes import pods
from k8sdds.deployment.kubernetes.api import Api
from k8sdds.errors import KubernetesError


class ApiView:
    """Nodes (read once, re-read on `refresh`) and the CNI (read once)."""

    def __init__(self, api: Api, arch: str | None = None):
        self.api = api
        self.arch = arch
        self._nodes: list[dict] | None = None
        self._detected: Detected | None = None

    def refresh(self) -> None:
        """A node may have gone since the last repeat."""
        self._nodes = None

    def nodes(self) -> list[dict]:
        """Every node: name, role, arch, kernel, kubelet, address, ready."""
        if self._nodes is None:
            items = self.api.call("list nodes", self.api.core(admin=True).list_node).items
            self._nodes = sorted((pods.node_info(n) for n in items), key=lambda n: n["name"])
        return self._nodes

    def workers(self) -> list[str]:
        """Ready nodes pods may go to (no control-plane role), of `arch` when given."""
        return [n["name"] for n in self.nodes() if n["ready"] and n["role"] == "worker"
                and (self.arch is None or n["arch"] == self.arch)]

    def detected(self) -> Detected:
        """The cluster's CNI, from its DaemonSets and their ConfigMaps."""
        if self._detected is None:
            sets = self.api.call("list DaemonSets",
                                 self.api.apps().list_daemon_set_for_all_namespaces).items
            core = self.api.core(admin=True)
            maps = {}
            for ns, name in cni.CONFIG_MAPS:
                try:
                    cm = self.api.call("", core.read_namespaced_config_map, name, ns)
                except KubernetesError:
                    continue  # absent (or not ours to read): detection goes without it
                maps[(ns, name)] = {"data": cm.data or {}}
            self._detected = cni.detect([self.api.serialize(d) for d in sets], maps)
        return self._detected
