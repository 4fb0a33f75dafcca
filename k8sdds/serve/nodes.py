"""The nodes `k8sdds serve` can run on, as they are now: the emulated testbeds that are up
(their nodes' namespaces present), the nodes of a Kubernetes cluster (Ready, and the
kubelet's last heartbeat), the hosts of an inventory whose sshd answers."""

from __future__ import annotations

import datetime as dt
from pathlib import Path


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def emulated() -> list[dict]:
    from k8sdds.testbed.layout import state_dir
    from k8sdds.testbed.testbed import Testbed

    out = []
    for state in sorted(state_dir().glob("*.json")):
        if state.stem.endswith("-kube"):
            continue
        try:
            tb = Testbed.existing(state.stem)
        except Exception:  # noqa: BLE001 - not a testbed's state file
            continue
        if tb is None:
            continue
        status = tb.status()
        for n in status["nodes"]:
            out.append({"backend": "emulated", "where": status["name"], "name": n["name"],
                        "state": "up" if n["present"] else "gone",
                        "last_seen": _now() if n["present"] else None})
    return out


def kubernetes(kubeconfig: Path, context: str | None = None) -> list[dict]:
    from kubernetes import client, config

    api = config.new_client_from_config(str(kubeconfig), context=context)
    try:
        out = []
        for node in client.CoreV1Api(api).list_node(_request_timeout=5).items:
            ready = next((c for c in node.status.conditions or [] if c.type == "Ready"), None)
            out.append({"backend": "kubernetes", "where": context or str(kubeconfig),
                        "name": node.metadata.name,
                        "state": "Ready" if ready and ready.status == "True" else "NotReady",
                        "last_seen": ready.last_heartbeat_time.isoformat()
                        if ready and ready.last_heartbeat_time else None})
        return out
    finally:
        api.close()


def ssh(inventory: Path) -> list[dict]:
    from k8sdds.cluster.inventory import load
    from k8sdds.cluster.remote import ssh_answers

    out = []
    for host in load(inventory).hosts:
        answered = ssh_answers(host.address, host.port)
        out.append({"backend": "ssh", "where": str(inventory), "name": host.name,
                    "state": "answers" if answered else "no answer",
                    "last_seen": _now() if answered else None})
    return out


def online(kubeconfig: Path | None = None, context: str | None = None,
           inventory: Path | None = None) -> list[dict]:
    """Every source given; one that fails is a row saying why, not an error."""
    out = emulated()
    for backend, source, call in (("kubernetes", kubeconfig, lambda: kubernetes(
            kubeconfig, context)), ("ssh", inventory, lambda: ssh(inventory))):
        if source is None:
            continue
        try:
            out += call()
        except Exception as exc:  # noqa: BLE001 - an unreachable cluster is a finding
            out.append({"backend": backend, "where": str(source), "name": "-",
                        "state": f"unreachable: {' '.join(str(exc).split())[:120]}",
                        "last_seen": None})
    return out
