"""The testbed cluster's life: the control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler) in the first node's namespace, a node agent on every
worker, a forwarder that brings the API server to this machine's loopback, and down that
removes every process, mount, cgroup and file (also after a crash: pids and paths are
recorded before they are used)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from k8sdds.errors import TestbedError
from k8sdds.testbed import cgroups, netns
from k8sdds.testbed.kube import node as agent
from k8sdds.testbed.kube import pki
from k8sdds.testbed.testbed import Node, Testbed, state_dir

API_PORT = 6443
# the testbed leaves pod-to-pod traffic untracked (testbed.MASQUERADE); a Service's reply
# must be un-NATed by conntrack, so on a cluster every packet is tracked, as on real nodes
UNTRACKED_OFF = "flush chain ip k8sdds raw_prerouting\nflush chain ip k8sdds raw_output\n"
SERVICE_RANGE = "10.96.0.0/16"


def binaries() -> Path:
    return Path(os.environ.get("K8SDDS_K8S_BIN", "/var/cache/k8sdds/bin"))


NEEDED = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
          "kube-proxy", "coredns")
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
TOOLS = {"etcd": "etcd-server", "containerd": "containerd", "runc": "runc", "ctr": "containerd",
         "nsenter": "util-linux", "/usr/lib/cni/bridge": "containernetworking-plugins"}


def missing() -> str | None:
    """Why a testbed cluster cannot be brought up here, or None."""
    lacking = [n for n in NEEDED if not (binaries() / n).exists()]
    if lacking:
        return (f"{', '.join(lacking)} not built in {binaries()} (run .ci/k8s-test-binaries, "
                "about 10 min once)")
    absent = sorted({pkg for tool, pkg in TOOLS.items()
                     if not (Path(tool).exists() if tool.startswith("/") else shutil.which(tool))})
    if absent:
        return f"needs the Debian packages {', '.join(absent)}"
    return None


class KubeCluster:
    """A real Kubernetes cluster on `testbed` (which must be up, with a datapath)."""

    def __init__(self, testbed: Testbed):
        self.tb = testbed
        name = testbed.spec.name
        self.run_dir = state_dir() / f"{name}-kube"
        self.data_dir = Path("/var/lib/k8sdds") / name
        self.state_file = state_dir() / f"{name}-kube.json"
        self.kubeconfig = self.run_dir / "admin.kubeconfig"

    def running(self) -> bool:
        """Whether a cluster was brought up here (and not taken down)."""
        return self.state_file.exists()

    # ---- state on disk: what to remove, recorded before it exists ---------------------
    def _state(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {"pids": [], "cgroups": [], "made": [], "port": None}

    def _record(self, **add) -> None:
        state = self._state()
        for key, value in add.items():
            state[key] = state[key] + value if isinstance(state.get(key), list) else value
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps(state))

    def _spawn(self, name: str, argv: list[str], ns: str | None = None) -> subprocess.Popen:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.run_dir / f"{name}.log", "ab")
        full = ["nsenter", f"--net=/run/netns/{ns}", "--", *argv] if ns else argv
        proc = subprocess.Popen(full, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self._record(pids=[proc.pid])
        return proc

    # ---- up --------------------------------------------------------------------------
    def up(self, images: list[Path], timeout: float = 180) -> Path:
        """Bring the cluster up; return the admin kubeconfig (API on this machine's loopback)."""
        reason = missing()
        if reason:
            raise TestbedError(f"a testbed cluster cannot run here: {reason}")
        control, workers = self.tb.nodes[0], [n for n in self.tb.workers()
                                               if n is not self.tb.nodes[0]]
        if not workers:
            raise TestbedError("a testbed cluster needs a worker beside the control plane")
        self.down()  # what a killed bring-up left
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for n in self.tb.nodes:  # kube-proxy's NAT needs pod traffic tracked, both ways
            netns.nft(n.ns, UNTRACKED_OFF)
        clients = {"admin": ("admin", "system:masters"),
                   "controller-manager": ("system:kube-controller-manager", "k8sdds"),
                   "scheduler": ("system:kube-scheduler", "k8sdds"),
                   "kube-proxy": ("system:kube-proxy", "k8sdds"),
                   "coredns": ("system:coredns", "k8sdds"),
                   **{n.name: (f"system:node:{n.name}", "system:nodes") for n in workers}}
        creds = pki.make(self.run_dir / "pki", control.address, clients)
        inside = f"https://{control.address}:{API_PORT}"
        for client in clients:
            (self.run_dir / f"{client}.kubeconfig").write_text(
                pki.kubeconfig(creds, inside, client))
        self._control_plane(control, creds)
        port = _free_port()
        self._record(port=port)
        self._spawn("forward", [sys.executable, "-m", "k8sdds.testbed.kube.forward", str(port),
                                f"/run/netns/{control.ns}", control.address, str(API_PORT)])
        self.kubeconfig.write_text(pki.kubeconfig(creds, f"https://127.0.0.1:{port}", "admin"))
        self._wait_api(creds, port, timeout)
        self._dns(control)
        for worker in workers:
            self._node(worker, images)
        self._wait_ready([w.name for w in workers], timeout)
        return self.kubeconfig

    def _control_plane(self, control: Node, creds: pki.Pki) -> None:
        d, bins, ns = self.run_dir, binaries(), control.ns
        self._spawn("etcd", ["etcd", "--data-dir", str(d / "etcd"), "--name", "control",
                             "--listen-client-urls", "http://127.0.0.1:2379",
                             "--advertise-client-urls", "http://127.0.0.1:2379",
                             "--listen-peer-urls", "http://127.0.0.1:2380",
                             "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                             "--initial-cluster", "control=http://127.0.0.1:2380"], ns)
        self._spawn("kube-apiserver", [
            str(bins / "kube-apiserver"), "--etcd-servers=http://127.0.0.1:2379",
            f"--bind-address={control.address}", f"--advertise-address={control.address}",
            f"--secure-port={API_PORT}", f"--tls-cert-file={creds.directory / 'apiserver.crt'}",
            f"--tls-private-key-file={creds.directory / 'apiserver.key'}",
            f"--token-auth-file={creds.directory / 'tokens.csv'}",
            f"--client-ca-file={creds.ca}", "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={creds.directory / 'sa.pub'}",
            f"--service-account-signing-key-file={creds.directory / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_RANGE}", "--allow-privileged=true",
            "--kubelet-preferred-address-types=InternalIP", "--feature-gates=WatchList=false",
            f"--cert-dir={d / 'certs'}"], ns)
        self._spawn("kube-controller-manager", [
            str(bins / "kube-controller-manager"),
            f"--kubeconfig={d / 'controller-manager.kubeconfig'}",
            f"--service-account-private-key-file={creds.directory / 'sa.key'}",
            f"--root-ca-file={creds.ca}", "--use-service-account-credentials=true",
            "--leader-elect=false", "--bind-address=127.0.0.1",
            f"--service-cluster-ip-range={SERVICE_RANGE}", "--controllers=*,-nodeipam"], ns)
        self._spawn("kube-scheduler", [
            str(bins / "kube-scheduler"), f"--kubeconfig={d / 'scheduler.kubeconfig'}",
            "--leader-elect=false", "--bind-address=127.0.0.1"], ns)

    def _dns(self, control: Node) -> None:
        """CoreDNS on the control-plane node, reading the API as system:coredns (only what
        it needs); the kubelets give pods its address."""
        from kubernetes import client, config

        api = client.RbacAuthorizationV1Api(config.new_client_from_config(str(self.kubeconfig)))
        meta = {"name": "system:coredns", "labels": {"app.kubernetes.io/managed-by": "k8sdds"}}
        api.create_cluster_role({"metadata": meta, "rules": COREDNS_RULES})
        api.create_cluster_role_binding({
            "metadata": meta, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                          "kind": "ClusterRole", "name": "system:coredns"},
            "subjects": [{"kind": "User", "name": "system:coredns",
                          "apiGroup": "rbac.authorization.k8s.io"}]})
        corefile = self.run_dir / "Corefile"
        corefile.write_text(COREFILE.format(kubeconfig=self.run_dir / "coredns.kubeconfig"))
        self._spawn("coredns", [str(binaries() / "coredns"), "-conf", str(corefile)],
                    control.ns)

    def _node(self, node: Node, images: list[Path]) -> None:
        files = agent.NodeFiles(self.data_dir / node.name, self.run_dir / node.name)
        for path in (files.root, files.run, files.run / "net.d"):
            path.mkdir(parents=True, exist_ok=True)
        # under the node's own cgroup, where the testbed puts its profile's CPU quota: the
        # pods are held to the node's CPU as its processes are
        cgroup_root = f"/k8sdds/{self.tb.spec.name}/{node.name}/kube"
        missing_dirs = [str(d) for d in cgroups.dirs(cgroup_root) if not d.exists()]
        self._record(cgroups=[cgroup_root], made=missing_dirs)
        cgroups.make_everywhere(cgroup_root)
        holder = self._spawn(f"{node.name}-holder", [
            "unshare", "--mount", "--propagation", "private", "sleep", "2147483647"], node.ns)
        _wait_own_mounts(holder)
        agent.mount_private(holder.pid, files)
        (files.run / "containerd.toml").write_text(agent.containerd_config(files))
        (files.run / "net.d" / "10-k8sdds.conflist").write_text(
            agent.cni_config(node.pod_cidr, node.gateway, 1500, files))
        (files.run / "resolv.conf").write_text("nameserver 127.0.0.1\n")
        containerd = self._spawn(f"{node.name}-containerd", agent.in_namespaces(
            holder.pid, ["containerd", "--config", str(files.run / "containerd.toml")]))
        agent.wait_socket(files.socket, containerd, f"containerd on {node.name}")
        for image in images:
            proc = subprocess.run(agent.in_namespaces(holder.pid, [
                "ctr", "--address", str(files.socket), "-n", "k8s.io", "images", "import",
                str(image)]), capture_output=True, text=True)
            if proc.returncode != 0:
                raise TestbedError(f"import {image.name} on {node.name}: {proc.stderr.strip()}")
        dns = self.tb.nodes[0].address
        (files.run / "kubelet.yaml").write_text(agent.kubelet_config(files, cgroup_root, dns))
        self._spawn(f"{node.name}-kubelet", agent.in_namespaces(holder.pid, [
            str(binaries() / "kubelet"), f"--config={files.run / 'kubelet.yaml'}",
            f"--kubeconfig={self.run_dir / f'{node.name}.kubeconfig'}",
            f"--root-dir={files.root / 'kubelet'}", f"--cert-dir={files.root / 'pki'}",
            f"--hostname-override={node.name}", f"--node-ip={node.address}",
            f"--volume-plugin-dir={files.root / 'volume-plugins'}"]))
        (files.run / "kube-proxy.yaml").write_text(agent.proxy_config(
            self.run_dir / "kube-proxy.kubeconfig", node))
        self._spawn(f"{node.name}-kube-proxy", [
            str(binaries() / "kube-proxy"), f"--config={files.run / 'kube-proxy.yaml'}"],
            node.ns)

    def _wait_api(self, creds: pki.Pki, port: int, timeout: float) -> None:
        if not wait_readyz(f"https://127.0.0.1:{port}", creds.ca, creds.tokens["admin"],
                           timeout):
            raise TestbedError(f"kube-apiserver not ready within {timeout:g} s (see "
                               f"{self.run_dir / 'kube-apiserver.log'})")

    def _wait_ready(self, names: list[str], timeout: float) -> None:
        """Watch the nodes until every one of `names` is Ready."""
        from kubernetes import client, config, watch
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        api = client.CoreV1Api(config.new_client_from_config(str(self.kubeconfig)))
        deadline, ready = time.monotonic() + timeout, set()
        while (left := deadline - time.monotonic()) > 0:
            w = watch.Watch()
            try:
                for event in w.stream(api.list_node, timeout_seconds=max(1, int(left)),
                                      _request_timeout=left + 10):
                    n = event["object"]
                    is_ready = any(c.type == "Ready" and c.status == "True"
                                   for c in n.status.conditions or [])
                    (ready.add if is_ready else ready.discard)(n.metadata.name)
                    if set(names) <= ready:
                        return
            except (ApiException, HTTPError):
                continue  # the watch broke: watch again while time is left
            finally:
                w.stop()
        raise TestbedError(f"nodes not Ready within {timeout:g} s: "
                           f"{', '.join(sorted(set(names) - ready))} (see "
                           f"{self.run_dir}/<node>-kubelet.log)")

    # ---- down ------------------------------------------------------------------------
    def down(self) -> None:
        """Every process (daemons, shims, containers), mount namespace, cgroup and file."""
        state = self._state()
        _stop(state["pids"])
        for root in state["cgroups"]:
            cgroups.remove_everywhere(root)
        for made in sorted(state.get("made", []), key=lambda d: -len(Path(d).parts)):
            try:  # what up made above the kubelet's root, deepest first; the rest stays
                Path(made).rmdir()
            except OSError:
                pass
        for path in (self.run_dir, self.data_dir):
            shutil.rmtree(path, ignore_errors=True)
        try:
            self.data_dir.parent.rmdir()  # /var/lib/k8sdds, when no other testbed uses it
        except OSError:
            pass
        self.state_file.unlink(missing_ok=True)


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_own_mounts(holder: subprocess.Popen, timeout: float = 10) -> None:
    """Until the holder (nsenter, then unshare, exec'ing each other) is in a mount namespace
    of its own: its mounts must not land in this machine's."""
    ours = os.readlink("/proc/self/ns/mnt")
    deadline = time.monotonic() + timeout
    while True:
        if holder.poll() is not None:
            raise TestbedError(f"the mount namespace holder exited ({holder.returncode})")
        try:
            if os.readlink(f"/proc/{holder.pid}/ns/mnt") != ours:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TestbedError(f"no private mount namespace within {timeout:g} s")
        time.sleep(0.01)  # an exec in another process: nothing to wait on but its /proc


def _stop(pids: list[int], grace: float = 5.0) -> None:
    """SIGTERM to every process group, SIGKILL to what is left after `grace` s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)  # processes we signalled: polled until they are gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours is gone for this purpose
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
