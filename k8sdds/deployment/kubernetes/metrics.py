"""What a repeat cost the cluster: metrics-server's CPU and memory readings (pure sums) and
their integral over time."""

from __future__ import annotations

import time


def metrics_totals(nodes: dict, pods: dict, prefix: str) -> tuple[float, float, float]:
    """metrics-server's NodeMetricsList and PodMetricsList -> (CPU cores of the pods whose
    name starts with `prefix`: the CNI's DaemonSet, CPU cores of every node, MiB of memory of
    those pods)."""
    cni = [c["usage"] for p in pods.get("items", []) if prefix
           and p["metadata"]["name"].startswith(prefix) for c in p.get("containers", [])]
    return (sum(cores(u["cpu"]) for u in cni),
            sum(cores(n["usage"]["cpu"]) for n in nodes.get("items", [])),
            sum(memory_bytes(u["memory"]) for u in cni) / 2**20)


def memory_bytes(quantity: str) -> float:
    """A memory quantity ("123456Ki", "12Mi", "1000") in bytes."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 1e3, "M": 1e6, "G": 1e9}
    for unit, factor in units.items():
        if quantity.endswith(unit):
            return float(quantity[:-len(unit)]) * factor
    return float(quantity)


def cores(quantity: str) -> float:
    """A CPU quantity of metrics-server ("12345678n", "250m", "2") in cores."""
    units = {"n": 1e-9, "u": 1e-6, "m": 1e-3}
    if quantity and quantity[-1] in units:
        return float(quantity[:-1]) * units[quantity[-1]]
    return float(quantity)


class Integral:
    """Cumulative core-seconds from successive rate readings (trapezoids)."""

    def __init__(self) -> None:
        self.total, self._last = 0.0, None

    def add(self, rate: float) -> float:
        now = time.monotonic()
        if self._last is not None:
            t, c = self._last
            self.total += (now - t) * (c + rate) / 2
        self._last = (now, rate)
        return self.total
