"""Kubernetes objects of a run, as plain dicts: pure, so every field is unit-tested.

A run owns one namespace (or objects in a given one), all labelled `managed-by: k8sdds` and
with the run's id, so `k8sdds cleanup` finds whatever a killed run left behind.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

MANAGED_BY = {"app.kubernetes.io/managed-by": "k8sdds"}
MANAGED_SELECTOR = "app.kubernetes.io/managed-by=k8sdds"
RUN_LABEL = "k8sdds.io/run"
REPEAT_LABEL = "k8sdds.io/repeat"
ROLE_LABEL = "k8sdds.io/role"
RUNNER = "k8sdds-runner"  # the ServiceAccount k8sdds acts as inside the namespace
ENGINE = "k8sdds-engine"  # the ServiceAccount of the engine pods: no rights, no token
SUBDOMAIN = "k8sdds"  # headless Service: each pod is <hostname>.k8sdds in the namespace
CREDENTIALS = "k8sdds-credentials"  # Secret with the run's TLS / DDS Security files
CONFIG_MOUNT = "/etc/k8sdds/config"
SECRETS_MOUNT = "/etc/k8sdds/secrets"
SCRATCH_MOUNT = "/tmp"
USER_ID = 65532  # non-root; the engines need no privilege

# what k8sdds does inside its namespace, and no more (least privilege)
RUNNER_RULES = (
    {"apiGroups": [""], "resources": ["pods"],
     "verbs": ["create", "get", "list", "watch", "delete", "deletecollection"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    # `cat /proc/loadavg` in its own pods: the node's load (procfs does not namespace it)
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["configmaps", "secrets"],
     "verbs": ["create", "get", "update", "delete", "deletecollection"]},
    {"apiGroups": [""], "resources": ["services"],
     "verbs": ["create", "get", "list", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
    # a path through a Service starts once the Service has a ready endpoint
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
     "verbs": ["list", "watch"]},
)


def labels(run_id: str, **extra: str) -> dict[str, str]:
    out = {**MANAGED_BY, RUN_LABEL: run_id}
    out.update({k: v for k, v in extra.items()})
    return out


def _meta(name: str, run_id: str, namespace: str | None = None, **extra: str) -> dict:
    meta: dict = {"name": name, "labels": labels(run_id, **extra)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def namespace(name: str, run_id: str) -> dict:
    # the host baseline's hostNetwork pods need the privileged Pod Security level, whatever
    # the cluster's default; every other pod meets `restricted`, which warns of any slip
    meta = _meta(name, run_id)
    meta["labels"]["pod-security.kubernetes.io/enforce"] = "privileged"
    meta["labels"]["pod-security.kubernetes.io/warn"] = "restricted"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def service_account(name: str, ns: str, run_id: str) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _meta(name, run_id, ns), "automountServiceAccountToken": False}


def role(ns: str, run_id: str) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": _meta(RUNNER, run_id, ns), "rules": [dict(r) for r in RUNNER_RULES]}


def role_binding(ns: str, run_id: str) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": _meta(RUNNER, run_id, ns),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": RUNNER},
            "subjects": [{"kind": "ServiceAccount", "name": RUNNER, "namespace": ns}]}


def headless_service(ns: str, run_id: str) -> dict:
    """Gives each pod the DNS name <hostname>.k8sdds, before it is ready: peers are named
    before their addresses exist."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(SUBDOMAIN, run_id, ns),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {RUN_LABEL: run_id}}}


def service(name: str, ns: str, run_id: str, repeat: str, role: str,
            ports: Sequence[tuple[int, str]], node_port: bool) -> dict:
    """The Service in front of one role's pod, for the pod-service (ClusterIP) and
    external-nodeport (NodePort) paths: traffic goes through kube-proxy as a client's would."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _meta(name, run_id, ns, **{REPEAT_LABEL: repeat}),
            "spec": {"type": "NodePort" if node_port else "ClusterIP",
                     "selector": {REPEAT_LABEL: repeat, ROLE_LABEL: role},
                     "ports": [{"name": f"{proto.lower()}-{port}", "port": port,
                                "targetPort": port, "protocol": proto}
                               for port, proto in ports]}}


def config_map(name: str, ns: str, run_id: str, files: Mapping[str, str], **extra: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, run_id, ns, **extra),
            "data": dict(files)}


def secret(name: str, ns: str, run_id: str, files: Mapping[str, bytes]) -> dict:
    import base64

    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(name, run_id, ns),
            "data": {k: base64.b64encode(v).decode() for k, v in files.items()}}


@dataclass(frozen=True)
class PodParams:
    """One role of one repeat, placed."""

    name: str  # pod name, also its hostname
    namespace: str
    run_id: str
    repeat: str  # "t3-r1"
    role: str  # also the container's name
    node: str
    image: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    config_map: str | None = None  # mounted at CONFIG_MOUNT
    credentials: bool = False  # the run's Secret mounted at SECRETS_MOUNT
    host_network: bool = False
    arch: str | None = None  # kubernetes.io/arch the node must have
    listen: int | None = None  # TCP port: the pod is Ready once it accepts connections
    pull_policy: str = "IfNotPresent"
    peers: tuple[str, ...] = ()  # DNS names that must resolve before the engine starts


def pod(p: PodParams) -> dict:
    """The pod of one role: pinned to its node (no scheduler decision to wait for or to
    differ between repeats), non-root, read-only root, no capabilities, no API token."""
    volumes: list[dict] = [{"name": "scratch", "emptyDir": {"sizeLimit": "64Mi"}}]
    mounts: list[dict] = [{"name": "scratch", "mountPath": SCRATCH_MOUNT}]
    if p.config_map:
        volumes.append({"name": "config", "configMap": {"name": p.config_map}})
        mounts.append({"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True})
    if p.credentials:
        volumes.append({"name": "credentials",
                        "secret": {"secretName": CREDENTIALS, "defaultMode": 0o440}})
        mounts.append({"name": "credentials", "mountPath": SECRETS_MOUNT, "readOnly": True})
    container: dict = {
        "name": p.role,
        "image": p.image,
        "imagePullPolicy": p.pull_policy,
        "command": list(p.argv),
        "env": [{"name": k, "value": v} for k, v in sorted(p.env.items())],
        "volumeMounts": mounts,
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
    }
    if p.listen:
        container["readinessProbe"] = {"exec": {"command": listening(p.listen)},
                                       "periodSeconds": 1, "failureThreshold": 30}
    selector = {"kubernetes.io/os": "linux"}
    if p.arch:
        selector["kubernetes.io/arch"] = p.arch
    spec: dict = {
        "nodeName": p.node,
        "nodeSelector": selector,
        "hostname": p.name,
        "subdomain": SUBDOMAIN,
        "restartPolicy": "Never",
        "serviceAccountName": ENGINE,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 2,
        "securityContext": {"runAsNonRoot": True, "runAsUser": USER_ID, "runAsGroup": USER_ID,
                            "fsGroup": USER_ID, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": volumes,
    }
    if p.peers:
        spec["initContainers"] = [peers_container(p.image, p.pull_policy, p.peers,
                                                  container["securityContext"])]
    if p.host_network:
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": _meta(p.name, p.run_id, p.namespace,
                              **{REPEAT_LABEL: p.repeat, ROLE_LABEL: p.role}),
            "spec": spec}


# an engine resolves its peers once, when it starts (Cyclone DDS, Perftest): it must not
# start before their names exist, which is only once their pods have addresses
WAIT_FOR_PEERS = 'for h in "$@"; do until getent hosts "$h" >/dev/null; do sleep 0.2; done; done'


def listening(port: int) -> list[str]:
    """A probe that the pod listens on TCP `port`, without connecting to it: a connection
    would be a client to a one-off server (iperf3 -s -1 ends after its first client), so the
    probe reads the pod's own socket table (state 0A: LISTEN), as the emulated backend does."""
    pattern = rf"^ *[0-9]+: [0-9A-F]+:{port:04X} [0-9A-F]+:[0-9A-F]+ 0A "
    return ["grep", "-qE", pattern, "/proc/net/tcp", "/proc/net/tcp6"]


def peers(addresses: Mapping[str, str], role: str) -> tuple[str, ...]:
    """The DNS names (not IP addresses: a Service's) among the other roles' addresses."""
    def is_ip(text: str) -> bool:
        try:
            ipaddress.ip_address(text)
            return True
        except ValueError:
            return False

    return tuple(a for r, a in addresses.items() if r != role and not is_ip(a))


def peers_container(image: str, pull_policy: str, peers: Sequence[str],
                    security: dict) -> dict:
    """An init container that waits until every peer's DNS name resolves (the pod's own
    timeout bounds it)."""
    return {"name": "peers", "image": image, "imagePullPolicy": pull_policy,
            "command": ["sh", "-c", WAIT_FOR_PEERS, "sh", *peers],
            "securityContext": security}


def dns_name(pod: str) -> str:
    """How other pods of the namespace reach `pod` (through the headless Service)."""
    return f"{pod}.{SUBDOMAIN}"

