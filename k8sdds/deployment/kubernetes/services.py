"""Paths through a Service: a ClusterIP (pod-service) or a NodePort (external-nodeport) in
front of the server, and the address and ports the driver dials instead."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from k8sdds.deployment.base import Placement
from k8sdds.deployment.kubernetes import objects as m
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


NO_CONTROLLER = 5.0  # seconds after which a Service still without EndpointSlices has none
# kube-proxy programs a ready endpoint on every node on its own time and reports it nowhere:
# the one wait here that is not on an event (measured: well under a second with
# minSyncPeriod 0; without it, a client dialled the ClusterIP into kube-proxy's REJECT rule)
PROXY_SETTLE = 1.0


def wait_endpoints(api: Api, service: str, timeout: float) -> bool:
    """Watch the Service's EndpointSlices until one lists a ready endpoint (kube-proxy then
    forwards to it); False after `timeout` s. A Service that gets no EndpointSlice within
    NO_CONTROLLER s is on a cluster without the controller that makes them: True."""
    from kubernetes import client, watch
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    def ready(slice_: dict) -> bool:
        return any((ep.get("conditions") or {}).get("ready")
                   for ep in slice_.get("endpoints") or [])

    discovery = client.DiscoveryV1Api(api.core().api_client)
    selector = f"kubernetes.io/service-name={service}"
    try:
        listed = discovery.list_namespaced_endpoint_slice(
            api.namespace, label_selector=selector, _request_timeout=30)
        slices = [api.serialize(item) for item in listed.items]
        if any(ready(s) for s in slices):
            return _settled()
        window = timeout if slices else min(timeout, NO_CONTROLLER)
        w = watch.Watch()
        try:
            for event in w.stream(discovery.list_namespaced_endpoint_slice, api.namespace,
                                  label_selector=selector,
                                  resource_version=listed.metadata.resource_version,
                                  timeout_seconds=max(1, int(window)),
                                  _request_timeout=window + 10):
                slices.append(event["raw_object"])
                if ready(event["raw_object"]):
                    return _settled()
        finally:
            w.stop()
    except (ApiException, HTTPError):
        return False
    return not slices


def _settled() -> bool:
    import time

    time.sleep(PROXY_SETTLE)
    return True
