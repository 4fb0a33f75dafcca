"""`k8sdds cluster init|join|reset`: kubeadm and the CNIs of the K8sDDS study, as argv lists.

What each CNI needs (pod CIDR, manifests pinned to a release, the steps after them) is data
here; the commands run on the hosts through `remote.Remote`. Manifests use current APIs (no
v1beta1 RBAC, no PodSecurityPolicy, no `master` label or taint): they are the projects' own
release manifests, applied by URL on the control plane.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from k8sdds.cluster.inventory import Inventory
from k8sdds.cluster.remote import HostError, Remote, on_hosts
from k8sdds.errors import UserError

ADMIN = "/etc/kubernetes/admin.conf"
KUBECTL = ("kubectl", "--kubeconfig", ADMIN)
READY_TIMEOUT = "600s"  # Raspberry Pis pull images slowly

FLANNEL = "https://github.com/flannel-io/flannel/releases/download/v0.26.7/kube-flannel.yml"
KUBE_ROUTER = ("https://raw.githubusercontent.com/cloudnativelabs/kube-router/v2.4.0/daemonset/"
               "kubeadm-kuberouter.yaml")
# Weave Net's last release (the project is archived; its manifest uses apps/v1 and rbac v1)
WEAVE = "https://github.com/weaveworks/weave/releases/download/v2.8.1/weave-daemonset-k8s.yaml"
CALICO = "https://raw.githubusercontent.com/projectcalico/calico/v3.29.3/manifests/calico.yaml"
CILIUM_VERSION = "1.17.4"


def _flannel_backend(kind: str) -> tuple[str, ...]:
    conf = json.dumps({"Network": "10.244.0.0/16", "EnableNFTables": False,
                       "Backend": {"Type": kind}})
    return (*KUBECTL, "-n", "kube-flannel", "patch", "configmap", "kube-flannel-cfg",
            "--type", "merge", "-p", json.dumps({"data": {"net-conf.json": conf}}))


RESTART_FLANNEL = (*KUBECTL, "-n", "kube-flannel", "rollout", "restart",
                   "daemonset/kube-flannel-ds")
WEAVE_SECRET = (*KUBECTL, "-n", "kube-system", "create", "secret", "generic", "weave-passwd",
                "--from-file=weave-passwd=/dev/stdin")
WEAVE_ENCRYPT = (*KUBECTL, "-n", "kube-system", "patch", "daemonset", "weave-net", "--type",
                 "json", "-p", json.dumps([{
                     "op": "add", "path": "/spec/template/spec/containers/0/env/-",
                     "value": {"name": "WEAVE_PASSWORD", "valueFrom": {"secretKeyRef": {
                         "name": "weave-passwd", "key": "weave-passwd"}}}}]))


@dataclass(frozen=True)
class Cni:
    name: str
    pod_cidr: str
    steps: tuple[tuple[str, ...], ...]  # on the control plane, after kubeadm init
    password: bool = False  # weave-encrypted: a generated secret goes to WEAVE_SECRET's stdin
    needs: tuple[str, ...] = field(default_factory=tuple)  # programs the control plane needs


CNIS: dict[str, Cni] = {c.name: c for c in (
    Cni("flannel-vxlan", "10.244.0.0/16", ((*KUBECTL, "apply", "-f", FLANNEL),)),
    Cni("flannel-hostgw", "10.244.0.0/16", ((*KUBECTL, "apply", "-f", FLANNEL),
                                            _flannel_backend("host-gw"), RESTART_FLANNEL)),
    Cni("kube-router", "10.244.0.0/16", ((*KUBECTL, "apply", "-f", KUBE_ROUTER),)),
    Cni("weave", "10.32.0.0/12", ((*KUBECTL, "apply", "-f", WEAVE),)),
    Cni("weave-encrypted", "10.32.0.0/12",
        (WEAVE_SECRET, (*KUBECTL, "apply", "-f", WEAVE), WEAVE_ENCRYPT), password=True),
    Cni("calico", "192.168.0.0/16", ((*KUBECTL, "apply", "-f", CALICO),)),
    Cni("cilium", "10.244.0.0/16",
        (("cilium", "install", "--kubeconfig", ADMIN, "--version", CILIUM_VERSION, "--set",
          "ipam.mode=kubernetes"),), needs=("cilium",)),
)}

JOIN = re.compile(r"^kubeadm join \S+:\d+ --token [a-z0-9]{6}\.[a-z0-9]{16} "
                  r"--discovery-token-ca-cert-hash sha256:[0-9a-f]{64}\s*$")


def init(remote: Remote, cni: Cni) -> list[str]:
    """kubeadm init on the control plane, then the CNI; returns what was done, in words."""
    host = remote.host
    _ok(remote, ("kubeadm", "init", f"--pod-network-cidr={cni.pod_cidr}",
                 f"--apiserver-advertise-address={host.address}", f"--node-name={host.name}"),
        root=True)
    done = [f"kubeadm init (pod network {cni.pod_cidr})"]
    for step in cni.steps:
        stdin = None
        if step == WEAVE_SECRET:
            stdin = secrets.token_urlsafe(32)  # weave's encryption password: never printed
        _ok(remote, step, root=True, stdin=stdin)
        done.append(shlex.join(step[3:] if step[0] == "kubectl" else step)[:90])
    return done


def join_command(remote: Remote) -> tuple[str, ...]:
    """A fresh join command from the control plane (a token valid 24 h), as argv."""
    r = _ok(remote, ("kubeadm", "token", "create", "--print-join-command"), root=True)
    line = r.out.strip().splitlines()[-1] if r.out.strip() else ""
    if remote.dry_run:
        line = ("kubeadm join CONTROL-PLANE:6443 --token TOKEN "
                "--discovery-token-ca-cert-hash sha256:HASH")
    elif not JOIN.match(line):
        raise HostError(f"unexpected answer to kubeadm token create: {line[:120]!r}")
    return tuple(shlex.split(line))


def join(remote: Remote, command: tuple[str, ...]) -> list[str]:
    _ok(remote, (*command, f"--node-name={remote.host.name}"), root=True)
    return ["kubeadm join"]


def wait_ready(remote: Remote) -> list[str]:
    _ok(remote, (*KUBECTL, "wait", "--for=condition=Ready", "node", "--all",
                 f"--timeout={READY_TIMEOUT}"), root=True, timeout=700)
    return ["every node Ready"]


RESET = (("kubeadm", "reset", "-f"), ("rm", "-rf", "/etc/cni/net.d", "/var/lib/cni"),
         ("ip", "link", "delete", "cni0"), ("ip", "link", "delete", "flannel.1"),
         ("ip", "link", "delete", "kube-bridge"), ("ip", "link", "delete", "weave"))


def join_all(inventory: Inventory, known_hosts: str, dry_run: bool, folder: Path
             ) -> dict[str, list[str] | HostError]:
    """The join sequence: a fresh join command from the control plane, every worker joined
    with it at once, then (when all joined) a wait on the control plane until every node is
    Ready. A control plane that cannot give the command touches no worker."""
    control = inventory.control_plane()
    log = folder / f"{control.name}.log"
    try:
        with Remote(control, known_hosts, log, dry_run=dry_run) as r:
            command = join_command(r)
    except HostError as exc:
        raise UserError(f"{control.name} (control plane): {exc}; no worker was touched"
                        ) from None
    results = on_hosts(inventory.workers(), known_hosts, dry_run, folder,
                       lambda r: join(r, command))
    if dry_run or not any(isinstance(v, HostError) for v in results.values()):
        try:
            with Remote(control, known_hosts, log, dry_run=dry_run) as r:
                ready = wait_ready(r)
            if not dry_run:
                results[control.name] = ready
        except HostError as exc:
            results[control.name] = exc
    return results


def reset(remote: Remote) -> list[str]:
    """kubeadm reset and what the CNIs leave behind (links that may not exist are fine)."""
    _ok(remote, RESET[0], root=True)
    _ok(remote, RESET[1], root=True)
    for argv in RESET[2:]:
        remote.run(argv, root=True)  # absent on this host: nothing to remove
    return ["kubeadm reset", "CNI state removed"]


def _ok(remote: Remote, argv, root: bool = False, stdin: str | None = None,
        timeout: float = 600):
    r = remote.run(argv, root=root, stdin=stdin, timeout=timeout)
    if r.code != 0 and not remote.dry_run:
        tail = (r.err.strip() or r.out.strip()).splitlines()[-1:] or [f"exit {r.code}"]
        raise HostError(f"{argv[0]} {argv[1] if len(argv) > 1 else ''}: {tail[0][:200]}")
    return r
