"""metrics-server on a testbed cluster: built from its Go module, run on the control-plane
node beside CoreDNS, registered as the `v1beta1.metrics.k8s.io` APIService (the API server
proxies to it with the front-proxy client certificate); it scrapes each kubelet's
/metrics/resource, so `kubectl top` and the kubernetes backend's CPU and memory readings work
as on a kubeadm cluster with metrics-server installed."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from k8sdds.errors import TestbedError

PORT = 4443
SERVICE = ("kube-system", "metrics-server")
USER = "system:metrics-server"
LABELS = {"app.kubernetes.io/managed-by": "k8sdds", "k8s-app": "metrics-server"}
# what metrics-server reads, as its own release manifest grants it
RULES = [{"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]},
         {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]}]


def apiserver_flags(pki_dir: Path) -> list[str]:
    """What the API server needs to proxy to an extension API server, as kubeadm sets it."""
    return [f"--requestheader-client-ca-file={pki_dir / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki_dir / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki_dir / 'front-proxy-client.key'}",
            # the control-plane node routes to the endpoint (node0's address), not the
            # Service's virtual address (no kube-proxy there)
            "--enable-aggregator-routing=true"]


def argv(binary: Path, kubeconfig: Path, address: str, cert_dir: Path) -> list[str]:
    return [str(binary), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}", f"--bind-address={address}",
            f"--secure-port={PORT}", f"--cert-dir={cert_dir}", "--kubelet-insecure-tls",
            "--kubelet-preferred-address-types=InternalIP", "--metric-resolution=15s"]


def register(kubeconfig: Path, address: str) -> None:
    """Its rights (its ClusterRole, auth delegation, reading the request-header CA), a
    Service whose endpoint is the process on `address`, and the APIService."""
    from kubernetes import client, config

    api = config.new_client_from_config(str(kubeconfig))
    rbac, core = client.RbacAuthorizationV1Api(api), client.CoreV1Api(api)
    subject = [{"kind": "User", "name": USER, "apiGroup": "rbac.authorization.k8s.io"}]
    meta = {"name": USER, "labels": LABELS}
    rbac.create_cluster_role({"metadata": meta, "rules": RULES})
    for name, role in ((USER, USER), ("metrics-server:system:auth-delegator",
                                      "system:auth-delegator")):
        rbac.create_cluster_role_binding({
            "metadata": {"name": name, "labels": LABELS}, "subjects": subject,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": role}})
    rbac.create_namespaced_role_binding("kube-system", {
        "metadata": {"name": "metrics-server-auth-reader", "labels": LABELS},
        "subjects": subject, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                         "kind": "Role",
                                         "name": "extension-apiserver-authentication-reader"}})
    ns, name = SERVICE
    core.create_namespaced_service(ns, {
        "metadata": {"name": name, "labels": LABELS},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": PORT}]}})
    core.create_namespaced_endpoints(ns, {  # mirrored into an EndpointSlice
        "metadata": {"name": name, "labels": LABELS},
        "subsets": [{"addresses": [{"ip": address}],
                     "ports": [{"name": "https", "port": PORT}]}]})
    client.ApiregistrationV1Api(api).create_api_service({
        "metadata": {"name": "v1beta1.metrics.k8s.io", "labels": LABELS},
        "spec": {"service": {"name": name, "namespace": ns, "port": 443},
                 "group": "metrics.k8s.io", "version": "v1beta1",
                 "insecureSkipTLSVerify": True,  # its serving certificate is self-signed
                 "groupPriorityMinimum": 100, "versionPriority": 100}})


def wait(kubeconfig: Path, timeout: float, exited: Callable[[], int | None],
         log: Path, pods_in: str = "") -> None:
    """Until the API server finds it Available and it has a reading of the nodes and, with
    `pods_in`, of the pods in that namespace (the CNI's: a run reads their CPU and memory,
    and metrics-server has a pod's first reading only a scrape or two after it started); at
    once when the process has exited (`exited()` is its status)."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    api = config.new_client_from_config(str(kubeconfig))
    reg, custom = client.ApiregistrationV1Api(api), client.CustomObjectsApi(api)
    deadline, why = time.monotonic() + timeout, "not Available"
    while time.monotonic() < deadline:
        if exited() is not None:
            lines = log.read_text(errors="replace").splitlines()
            said = [x for x in lines if x.startswith(("Error:", "panic:"))] or lines[-1:] or [""]
            raise TestbedError(f"metrics-server exited with status {exited()}: {said[-1]} "
                               f"(see {log})")
        conds = reg.read_api_service("v1beta1.metrics.k8s.io").status.conditions or []
        available = next((c for c in conds if c.type == "Available"), None)
        if available and available.status == "True":
            try:
                nodes = custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1",
                                                          "nodes", _request_timeout=5)
                why = "" if nodes.get("items") else "no node readings yet"
                if not why and pods_in and not custom.list_namespaced_custom_object(
                        "metrics.k8s.io", "v1beta1", pods_in, "pods",
                        _request_timeout=5).get("items"):
                    why = f"no readings of the pods in {pods_in} yet"
                if not why:
                    return
            except ApiException as exc:
                why = f"{exc.status} {exc.reason}"
        elif available:
            why = f"{available.reason}: {available.message}"
        time.sleep(1)  # an APIService's availability and a scrape: polled
    raise TestbedError(f"metrics-server not ready within {timeout:g} s ({why})")
