"""Pure readings of pods and nodes, as the API serves them (dicts): phase, exit status, why a
pod will never run. No I/O: tested on hand-made objects."""

from __future__ import annotations

from typing import Any

# container states that will not get better by waiting
FATAL_WAITING = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                 "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
                 "CrashLoopBackOff")


def phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def container_state(pod: dict) -> dict:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return (statuses[0].get("state") or {}) if statuses else {}


def exit_code(pod: dict) -> int | None:
    term = container_state(pod).get("terminated")
    return int(term["exitCode"]) if term and term.get("exitCode") is not None else None


def started(pod: dict) -> bool:
    return phase(pod) in ("Running", "Succeeded", "Failed")


def finished(pod: dict) -> bool:
    return phase(pod) in ("Succeeded", "Failed") or exit_code(pod) is not None


def ready_or_done(pod: dict) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return finished(pod) or any(c.get("type") == "Ready" and c.get("status") == "True"
                                for c in conds)


def fatal(pod: dict) -> str | None:
    """Why a pod that is not there yet never will be, or None while there is hope."""
    state = container_state(pod).get("waiting") or {}
    if state.get("reason") in FATAL_WAITING:
        return f"{state['reason']}: {state.get('message', '')}".rstrip(": ")
    status = pod.get("status") or {}
    if status.get("phase") == "Failed" and not container_state(pod):
        return f"{status.get('reason', 'Failed')}: {status.get('message', '')}".rstrip(": ")
    for cond in status.get("conditions") or []:
        if (cond.get("type") == "PodScheduled" and cond.get("status") == "False"
                and cond.get("reason") == "Unschedulable"):
            return f"Unschedulable: {cond.get('message', '')}"
    return None


def status_reasons(pod: dict | None) -> list[str]:
    """The pod's own account of itself: phase, failing conditions, a waiting container."""
    if not pod:
        return []
    reasons = [f"phase {phase(pod)}"]
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "True" and cond.get("message"):
            reasons.append(f"{cond['type']}: {cond.get('reason')}: {cond['message']}")
    state = container_state(pod)
    if "waiting" in state:
        reasons.append(f"{state['waiting'].get('reason')}: "
                       f"{state['waiting'].get('message', '')}".rstrip(": "))
    return reasons


def node_info(n: Any) -> dict:
    """A V1Node -> name, role, arch, kernel, kubelet, os, runtime, address, ready."""
    labels = n.metadata.labels or {}
    info = n.status.node_info
    conds = {c.type: c.status for c in (n.status.conditions or [])}
    control = ("node-role.kubernetes.io/control-plane" in labels
               or any(t.effect == "NoSchedule" and "control-plane" in t.key
                      for t in (n.spec.taints or [])))
    address = next((a.address for a in (n.status.addresses or [])
                    if a.type == "InternalIP"), "")
    return {"name": n.metadata.name, "role": "control-plane" if control else "worker",
            "arch": labels.get("kubernetes.io/arch", info.architecture if info else ""),
            "kernel": info.kernel_version if info else "",
            "kubelet": info.kubelet_version if info else "",
            "os": info.os_image if info else "",
            "runtime": info.container_runtime_version if info else "",
            "address": address, "ready": conds.get("Ready") == "True"}


def node_list(nodes: list[dict]) -> str:
    return ", ".join(f"{n['name']} ({n['role']}, {n['arch']}, "
                     f"{'Ready' if n['ready'] else 'NotReady'})" for n in nodes) or "none"
