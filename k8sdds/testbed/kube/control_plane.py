"""The testbed cluster's control plane as data: each daemon's argv (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, in the first node's namespace), CoreDNS's
configuration and rights, and the wait for the API server. The node agents and the cluster's
life are kubelets.py."""

from __future__ import annotations

import ssl
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from k8sdds.testbed.kube import metrics_server, pki

API_PORT = 6443
SERVICE_RANGE = "10.96.0.0/16"
COREFILE = """.:53 {{
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} k8sdds
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""
# what CoreDNS reads (its own ClusterRole, as kubeadm's)
COREDNS_RULES = [{"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
                  "verbs": ["list", "watch"]},
                 {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                  "verbs": ["list", "watch"]}]


def daemons(d: Path, bins: Path, address: str, creds: pki.Pki) -> dict[str, list[str]]:
    """Each control-plane daemon's argv, in the order they start (`d`: the cluster's run
    directory; `bins`: the Go-built parts; `address`: the control-plane node's)."""
    keys = creds.directory
    return {
        "etcd": ["etcd", "--data-dir", str(d / "etcd"), "--name", "control",
                 "--listen-client-urls", "http://127.0.0.1:2379",
                 "--advertise-client-urls", "http://127.0.0.1:2379",
                 "--listen-peer-urls", "http://127.0.0.1:2380",
                 "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                 "--initial-cluster", "control=http://127.0.0.1:2380"],
        "kube-apiserver": [
            str(bins / "kube-apiserver"), "--etcd-servers=http://127.0.0.1:2379",
            f"--bind-address={address}", f"--advertise-address={address}",
            f"--secure-port={API_PORT}", f"--tls-cert-file={keys / 'apiserver.crt'}",
            f"--tls-private-key-file={keys / 'apiserver.key'}",
            f"--token-auth-file={keys / 'tokens.csv'}",
            f"--client-ca-file={creds.ca}", "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={keys / 'sa.pub'}",
            f"--service-account-signing-key-file={keys / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_RANGE}", "--allow-privileged=true",
            "--kubelet-preferred-address-types=InternalIP", "--feature-gates=WatchList=false",
            f"--cert-dir={d / 'certs'}", *metrics_server.apiserver_flags(keys)],
        "kube-controller-manager": [
            str(bins / "kube-controller-manager"),
            f"--kubeconfig={d / 'controller-manager.kubeconfig'}",
            f"--service-account-private-key-file={keys / 'sa.key'}",
            f"--root-ca-file={creds.ca}", "--use-service-account-credentials=true",
            "--leader-elect=false", "--bind-address=127.0.0.1",
            f"--service-cluster-ip-range={SERVICE_RANGE}", "--controllers=*,-nodeipam",
            f"--flex-volume-plugin-dir={d / 'flex-volumes'}"],  # not /usr/libexec
        "kube-scheduler": [
            str(bins / "kube-scheduler"), f"--kubeconfig={d / 'scheduler.kubeconfig'}",
            "--leader-elect=false", "--bind-address=127.0.0.1"],
    }


def coredns(kubeconfig: Path, run_dir: Path) -> Path:
    """CoreDNS's rights (a ClusterRole of only what it reads, bound to system:coredns) made
    through the admin `kubeconfig`, and its Corefile written; returns the Corefile."""
    from kubernetes import client, config

    api = client.RbacAuthorizationV1Api(config.new_client_from_config(str(kubeconfig)))
    meta = {"name": "system:coredns", "labels": {"app.kubernetes.io/managed-by": "k8sdds"}}
    api.create_cluster_role({"metadata": meta, "rules": COREDNS_RULES})
    api.create_cluster_role_binding({
        "metadata": meta, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                      "kind": "ClusterRole", "name": "system:coredns"},
        "subjects": [{"kind": "User", "name": "system:coredns",
                      "apiGroup": "rbac.authorization.k8s.io"}]})
    corefile = run_dir / "Corefile"
    corefile.write_text(COREFILE.format(kubeconfig=run_dir / "coredns.kubeconfig"))
    return corefile


def wait_readyz(server: str, ca: Path, token: str, timeout: float,
                check: Callable[[], None] = lambda: None) -> bool:
    """Whether the API server at `server` answers /readyz within `timeout` s; `check()` runs
    between tries (to raise when the process serving it has died)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    request = urllib.request.Request(f"{server}/readyz",
                                     headers={"Authorization": f"Bearer {token}"})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        check()
        try:
            with urllib.request.urlopen(request, context=ctx, timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)  # readiness of a process we started: polled
    return False
