"""What a repeat cost the nodes and the CNI, read while it runs: the nodes' load average (by
exec in the repeat's own pods) and metrics-server's CPU and memory, where it is installed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from k8sdds.deployment.base import Handle
from k8sdds.deployment.kubernetes.api import Api
from k8sdds.deployment.kubernetes.metrics import Integral, metrics_totals


class Usage:
    """Cumulative counters for `Backend.usage()`; says once (in `not_applied`) when
    metrics-server cannot be read."""

    def __init__(self, api: Api, not_applied: list[str]):
        self.api = api
        self.not_applied = not_applied
        self._metrics: bool | None = None  # None: not tried yet
        self._cni_cpu, self._node_cpu = Integral(), Integral()
        self._load: float | None = None  # the last node load read in this repeat

    def reset(self) -> None:
        """A new repeat: its load is read afresh."""
        self._load = None

    def read(self, handles: Sequence[Handle], nodes_of: Mapping[str, str],
             daemonset: str) -> dict[str, float]:
        """CPU seconds of the CNI's pods and of the nodes, integrated from metrics-server's
        rates, and the CNI pods' memory now; the 1-minute load average of the nodes the
        repeat runs on (kept from the last reading while one still ran)."""
        out: dict[str, float] = {}
        load = self.node_load(handles, nodes_of)
        if load is not None:
            self._load = load
        if self._load is not None and handles:
            out["node_load1"] = self._load
        metrics = self.metrics(daemonset)
        if metrics is None:
            return out
        cni_cores, node_cores, cni_mb = metrics
        return {**out, "datapath_cpu_s": self._cni_cpu.add(cni_cores),
                "node_cpu_s": self._node_cpu.add(node_cores), "datapath_memory_mb": cni_mb}

    def node_load(self, handles: Sequence[Handle], nodes_of: Mapping[str, str]
                  ) -> float | None:
        """Mean 1-minute load average over the repeat's nodes: `cat /proc/loadavg` by exec
        in one running pod per node (the file is the node's: procfs does not namespace it)."""
        from kubernetes.stream import stream

        per_node: dict[str, Handle] = {}
        for handle in handles:
            per_node.setdefault(nodes_of.get(handle.ref, ""), handle)
        core = self.api.core()
        loads = []
        for handle in per_node.values():
            try:
                out = stream(core.connect_get_namespaced_pod_exec, handle.ref,
                             self.api.namespace, container=handle.role,
                             command=["cat", "/proc/loadavg"], stderr=True, stdin=False,
                             stdout=True, tty=False, _request_timeout=10)
                loads.append(float(str(out).split()[0]))
            except Exception:  # noqa: BLE001 - finished, not running yet, no `cat`: skip it
                continue
        return sum(loads) / len(loads) if loads else None

    def metrics(self, daemonset: str) -> tuple[float, float, float] | None:
        """(CNI cores, node cores, CNI MiB) from metrics-server, or None without it."""
        if self._metrics is False:
            return None
        custom = self.api.custom()
        try:
            nodes = custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes",
                                                      _request_timeout=10)
            pods = {"items": []}
            if daemonset:
                pods = custom.list_namespaced_custom_object(
                    "metrics.k8s.io", "v1beta1", daemonset.split("/")[0], "pods",
                    _request_timeout=10)
        except Exception as exc:  # noqa: BLE001 - absent, forbidden or broken: said once
            if self._metrics is None:
                self.not_applied.append(
                    "CNI and node CPU: metrics-server is not installed or not readable "
                    f"({getattr(exc, 'status', '') or type(exc).__name__})")
            self._metrics = False
            return None
        self._metrics = True
        return metrics_totals(nodes, pods, daemonset.split("/")[-1])
