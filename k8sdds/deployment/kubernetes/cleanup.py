"""Removing what k8sdds made on a cluster: by a run at its end, or by `k8sdds cleanup`
after a run that was killed."""

from __future__ import annotations

from k8sdds.deployment.kubernetes import objects as m
from k8sdds.deployment.kubernetes.api import Api
from k8sdds.deployment.kubernetes.watch import gone
from k8sdds.errors import KubernetesError


def delete_repeat(api: Api, selector: str, timeout: float) -> None:
    """A repeat's pods (waiting until they are gone, so the next repeat starts on a quiet
    network; forced after `timeout` s, for a pod no kubelet confirms), then its ConfigMaps."""
    core = api.core()
    api.call("delete pods", core.delete_collection_namespaced_pod, api.namespace,
             label_selector=selector, grace_period_seconds=2)
    if not gone(core, api.namespace, selector, timeout):
        api.call("delete pods by force", core.delete_collection_namespaced_pod,
                 api.namespace, label_selector=selector, grace_period_seconds=0)
    api.call("delete ConfigMaps", core.delete_collection_namespaced_config_map,
             api.namespace, label_selector=selector)


def managed_namespaces(api_client) -> list[str]:
    """The namespaces k8sdds made (labelled managed-by=k8sdds)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        spaces = client.CoreV1Api(api_client).list_namespace(
            label_selector=m.MANAGED_SELECTOR, _request_timeout=30).items
    except (ApiException, HTTPError, OSError) as exc:
        raise KubernetesError(f"list namespaces on {api_client.configuration.host}: {exc}"
                              ) from None
    return sorted(ns.metadata.name for ns in spaces)


def remove(api_client, namespace: str, run_id: str | None = None,
           delete_namespace: bool = True) -> list[str]:
    """Delete every object k8sdds made in `namespace` (of one run, or of any), and the
    namespace itself when asked and k8sdds made it; returns what was deleted, as kind/name.
    Object by object: a cluster without a namespace controller (or a slow one) would
    otherwise keep them."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    selector = m.MANAGED_SELECTOR + (f",{m.RUN_LABEL}={run_id}" if run_id else "")
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    gone = []
    kinds = (("Pod", core.list_namespaced_pod, core.delete_namespaced_pod),
             ("ConfigMap", core.list_namespaced_config_map, core.delete_namespaced_config_map),
             ("Secret", core.list_namespaced_secret, core.delete_namespaced_secret),
             ("Service", core.list_namespaced_service, core.delete_namespaced_service),
             ("RoleBinding", rbac.list_namespaced_role_binding,
              rbac.delete_namespaced_role_binding),
             ("Role", rbac.list_namespaced_role, rbac.delete_namespaced_role),
             ("ServiceAccount", core.list_namespaced_service_account,
              core.delete_namespaced_service_account))
    for kind, lister, deleter in kinds:
        try:
            items = lister(namespace, label_selector=selector, _request_timeout=30).items
        except ApiException as exc:
            if exc.status == 404:
                break  # no such namespace: nothing in it
            raise KubernetesError(f"list {kind}s in {namespace}: {exc.status} {exc.reason}"
                                  ) from None
        for item in items:
            try:
                kwargs = {"grace_period_seconds": 0} if kind == "Pod" else {}
                deleter(item.metadata.name, namespace, _request_timeout=30, **kwargs)
                gone.append(f"{kind}/{item.metadata.name}")
            except ApiException as exc:
                if exc.status != 404:
                    raise KubernetesError(f"delete {kind} {item.metadata.name}: {exc.status} "
                                          f"{exc.reason}") from None
    if delete_namespace:
        try:
            ns = core.read_namespace(namespace, _request_timeout=30)
            if (ns.metadata.labels or {}).get(next(iter(m.MANAGED_BY))) == "k8sdds":
                core.delete_namespace(namespace, _request_timeout=30)
                gone.append(f"Namespace/{namespace}")
        except ApiException as exc:
            if exc.status != 404:
                raise KubernetesError(f"delete namespace {namespace}: {exc.status} "
                                      f"{exc.reason}") from None
    return gone
