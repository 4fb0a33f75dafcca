"""The fingerprint probes of a kubernetes run: on each placed node, before any role starts,
one pod on the host's network (the node's interfaces, sysctls, kernel, CPU and governor) and
one on the pod network (what a role's pod gets: its interface's MTU and offloads). Both run
the engine image as the roles do (non-root, read-only, no capability: reading needs none),
print `fingerprint.probe_script`'s output to their log and exit; the log is read back and
the pods deleted."""

from __future__ import annotations

from collections.abc import Sequence

from k8sdds import fingerprint, stopping
from k8sdds.deployment.kubernetes import objects as m
from k8sdds.deployment.kubernetes import pods, watch
from k8sdds.deployment.kubernetes.api import Api
from k8sdds.deployment.kubernetes.cleanup import delete_repeat
from k8sdds.errors import KubernetesError

ROLE = "probe"
SIDES = ("host", "pod")  # where the probe pod's network is


def pod_names(run_id: str, nodes: Sequence[str],
              sides: Sequence[str] = SIDES) -> dict[tuple[str, str], str]:
    """(node, side) -> pod name: by the node's index (a node's name may hold dots, which a
    pod's hostname may not)."""
    return {(node, side): f"fp{i}-{side}-{run_id}"
            for i, node in enumerate(nodes) for side in sides}


def specs(namespace: str, run_id: str, image: str, nodes: Sequence[str],
          arch: str | None = None, pull_policy: str = "IfNotPresent",
          sides: Sequence[str] = SIDES) -> list[dict]:
    """The probe pods, as the API takes them. Pure."""
    out = []
    for (node, side), name in pod_names(run_id, nodes, sides).items():
        script = fingerprint.probe_script(network_only=side == "pod")
        out.append(m.pod(m.PodParams(
            name=name, namespace=namespace, run_id=run_id, repeat=label(run_id), role=ROLE,
            node=node, image=image, argv=("sh", "-c", script), host_network=side == "host",
            arch=arch, pull_policy=pull_policy)))
    return out


def label(run_id: str) -> str:
    return f"fp-{run_id}"


def read(api: Api, run_id: str, image: str, nodes: Sequence[str], timeout: float,
         arch: str | None = None, sides: Sequence[str] = SIDES) -> dict[tuple[str, str], str]:
    """Run the probes on `sides` (the pod network's is left out where every role runs on
    the host's); (node, side) -> the log of each. Raises KubernetesError (the pods' own
    reason) when one cannot run; the pods go either way."""
    core, selector = api.core(), f"{m.REPEAT_LABEL}={label(run_id)}"
    names = pod_names(run_id, nodes, sides)
    try:
        for spec in specs(api.namespace, run_id, image, nodes, arch, sides=sides):
            api.call(f"create pod {spec['metadata']['name']}", core.create_namespaced_pod,
                     api.namespace, spec)
        watch.until(api, selector, list(names.values()), pods.finished, timeout,
                    "finished")
        logs = {}
        for where, name in names.items():
            data = api.pod_log(name, ROLE)
            if data is None:
                raise KubernetesError(f"pod {name} left no log")
            logs[where] = data.decode(errors="replace")
        return logs
    finally:
        delete_repeat(api, selector, stopping.bound(30.0))
