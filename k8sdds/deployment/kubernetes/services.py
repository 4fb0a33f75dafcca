"""Paths through a Service: a ClusterIP (pod-service) or a NodePort (external-nodeport) in
front of the server, and the address and ports the driver dials instead."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from k8sdds.deployment.base import Placement
from k8sdds.deployment.kubernetes import manifests as m
from k8sdds.deployment.kubernetes.api import Api
from k8sdds.errors import KubernetesError


def behind_service(api: Api, run_id: str, repeat: str, server: Placement, node_port: bool,
                   ports: Sequence[tuple[int, str]], node_address: str
                   ) -> tuple[Placement, str]:
    """Make the Service; return the server's placement as the driver sees it, and the
    Service's name (deleted with the repeat)."""
    name = f"{server.where}-svc"
    core = api.core()
    # one NodePort for every protocol of a port (iperf3 -u: TCP control, UDP data): the
    # first is allocated, the others are asked for with its number
    body = m.service(name, api.namespace, run_id, repeat, server.role,
                     list(ports[:1]) if node_port else list(ports), node_port)
    svc = api.call(f"create Service {name}", core.create_namespaced_service, api.namespace,
                   body)
    if not node_port:
        return replace(server, address=svc.spec.cluster_ip), name
    allocated = svc.spec.ports[0].node_port
    extra = [{"op": "add", "path": "/spec/ports/-",
              "value": {"name": f"{proto.lower()}-{port}", "port": port,
                        "targetPort": port, "protocol": proto, "nodePort": allocated}}
             for port, proto in ports[1:]]
    if extra:
        api.call(f"add ports to Service {name}", core.patch_namespaced_service, name,
                 api.namespace, extra)
    if not node_address:
        raise KubernetesError(f"node {server.node} has no InternalIP for its NodePort")
    return replace(server, address=node_address,
                   ports={port: allocated for port, _ in ports}), name
