"""`k8sdds cluster join`'s wait: every node registered and Ready, then every DaemonSet's pods
(the CNI's, kube-proxy) ready on every node, asked of the control plane's kubectl."""

from __future__ import annotations

import json
import time

from k8sdds.cluster.remote import HostError, Remote, checked

ADMIN = "/etc/kubernetes/admin.conf"
KUBECTL = ("kubectl", "--kubeconfig", ADMIN)
READY_TIMEOUT_S = 600.0  # Raspberry Pis pull images slowly


def wait_ready(remote: Remote, names: list[str], timeout: float = READY_TIMEOUT_S
               ) -> list[str]:
    """Until every node in `names` has registered (kubeadm join returns before the kubelet
    does), then until each is Ready."""
    deadline = time.monotonic() + timeout
    while not remote.dry_run:
        listed = checked(remote, (*KUBECTL, "get", "nodes", "-o", "name"), root=True)
        absent = set(names) - {n.removeprefix("node/") for n in listed.out.split()}
        if not absent:
            break
        if time.monotonic() > deadline:
            raise HostError(f"{', '.join(sorted(absent))} did not register within "
                            f"{timeout:g} s (see its kubelet's log)")
        time.sleep(2)  # another host's kubelet registering: nothing here to wait on
    checked(remote, (*KUBECTL, "wait", "--for=condition=Ready", *(f"node/{n}" for n in names),
                     f"--timeout={max(1, int(deadline - time.monotonic()))}s"), root=True,
            timeout=timeout + 60)
    return ["every node Ready", _daemonsets_ready(remote, deadline)]


def unready_daemonsets(listing: dict) -> list[str]:
    """The DaemonSets of `kubectl get daemonsets -A -o json` whose pods are not all ready
    and up to date (a node's CNI pod still starting), as namespace/name. Pure."""
    late = []
    for ds in listing.get("items", []):
        st = ds.get("status", {})
        want = st.get("desiredNumberScheduled", 0)
        if (st.get("numberReady", 0) < want or st.get("updatedNumberScheduled", 0) < want
                or st.get("observedGeneration", 0) < ds["metadata"].get("generation", 0)):
            late.append(f"{ds['metadata']['namespace']}/{ds['metadata']['name']}")
    return late


def _daemonsets_ready(remote: Remote, deadline: float) -> str:
    """Until every DaemonSet's pods are ready on every node (the CNI's and kube-proxy): a
    node is Ready once its CNI pod wrote the configuration, while the other nodes' CNI pods
    may not route to it yet, and a run started then loses its first repeat."""
    while True:
        listed = checked(remote, (*KUBECTL, "get", "daemonsets", "-A", "-o", "json"), root=True)
        late = [] if remote.dry_run else unready_daemonsets(json.loads(listed.out))
        if not late:
            return "every DaemonSet's pods ready"
        if time.monotonic() > deadline:
            raise HostError(f"the pods of {', '.join(late)} not ready in time (kubectl -n "
                            f"NAMESPACE describe daemonset NAME)")
        time.sleep(2)  # their pods starting: polled through the host's kubectl, as above
