"""The testbed cluster's life: the control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler) in the first node's namespace, a node agent on every
worker, a forwarder that brings the API server to this machine's loopback, and down that
removes every process, mount, cgroup and file (also after a crash: pids and paths are
recorded before they are used). What the control plane's daemons are is control_plane.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from k8sdds.caches import k8s_bin as binaries  # the Go-built parts
from k8sdds.errors import TestbedError
from k8sdds.testbed import cgroups, netns
from k8sdds.testbed.kube import control_plane, metrics_server, pki, procs
from k8sdds.testbed.kube import node as agent
from k8sdds.testbed.kube.control_plane import API_PORT, wait_readyz
from k8sdds.testbed.kube.watching import watched
from k8sdds.testbed.layout import Node, state_dir
from k8sdds.testbed.netfilter import UNTRACKED_OFF
from k8sdds.testbed.testbed import Testbed

if TYPE_CHECKING:
    from k8sdds.testbed.kube.pod_network import PodNetwork

NEEDED = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
          "kube-proxy", "coredns")
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


class Kubelets:
    """The testbed's real Kubernetes: the control plane on node0, a kubelet and kube-proxy on
    every worker (`testbed` must be up, with a datapath)."""

    def __init__(self, testbed: Testbed):
        self.tb = testbed
        name = testbed.spec.name
        self.run_dir = state_dir() / f"{name}-kube"
        self.data_dir = Path("/var/lib/k8sdds") / name
        self.state_file = state_dir() / f"{name}-kube.json"
        self.kubeconfig = self.run_dir / "admin.kubeconfig"

    def _files(self, node: str) -> agent.NodeFiles:
        """Where `node` keeps its state; the node view is one path for every node."""
        return agent.NodeFiles(self.data_dir / node, self.run_dir / node, self.run_dir / "node")

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

    def _spawn(self, name: str, argv: list[str], ns: str | None = None,
               env: dict[str, str] | None = None) -> subprocess.Popen:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.run_dir / f"{name}.log", "ab")
        full = ["nsenter", f"--net=/run/netns/{ns}", "--", *argv] if ns else argv
        proc = subprocess.Popen(full, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, **env} if env else None)
        log.close()
        self._record(pids=[proc.pid])
        return proc

    # ---- up --------------------------------------------------------------------------
    def up(self, images: list[Path], cni: PodNetwork, timeout: float = 300) -> Path:
        """Bring the cluster up with `cni` carrying the pods; return the admin kubeconfig
        (API on this machine's loopback). Each wait gets `timeout` s: on a busy 2-core
        machine the CNI's pods took longer than 180 s once."""
        reason = missing()
        if reason:
            raise TestbedError(f"a testbed cluster cannot run here: {reason}")
        control, workers = self.tb.nodes[0], [n for n in self.tb.workers()
                                               if n is not self.tb.nodes[0]]
        if not workers:
            raise TestbedError("a testbed cluster needs a worker beside the control plane")
        self.down()  # what a killed bring-up left
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._record(cni=cni.describe())
        for n in self.tb.nodes:  # kube-proxy's NAT needs pod traffic tracked, both ways
            netns.nft(n.ns, UNTRACKED_OFF)
            # as a real node has: a default route (flanneld finds its interface by it, and
            # a hostNetwork pod reaches a Service's address)
            netns.ip("route", "replace", "default", "dev", "eth0", ns=n.ns)
        clients = {"admin": ("admin", "system:masters"),
                   "controller-manager": ("system:kube-controller-manager", "k8sdds"),
                   "scheduler": ("system:kube-scheduler", "k8sdds"),
                   "kube-proxy": ("system:kube-proxy", "k8sdds"),
                   "coredns": ("system:coredns", "k8sdds"),
                   "metrics-server": (metrics_server.USER, "k8sdds"),
                   **{n.name: (f"system:node:{n.name}", "system:nodes") for n in workers}}
        creds = pki.make(self.run_dir / "pki", control.address, clients)
        inside = f"https://{control.address}:{API_PORT}"
        for client in clients:
            (self.run_dir / f"{client}.kubeconfig").write_text(
                pki.kubeconfig(creds, inside, client))
        self._control_plane(control, creds)
        port = procs.free_port()
        self._record(port=port)
        self._spawn("forward", [sys.executable, "-m", "k8sdds.testbed.kube.forward", str(port),
                                f"/run/netns/{control.ns}", control.address, str(API_PORT)])
        self.kubeconfig.write_text(pki.kubeconfig(creds, f"https://127.0.0.1:{port}", "admin"))
        self._wait_api(creds, port, timeout)
        self._dns(control)
        metrics = None
        if (binaries() / "metrics-server").exists():  # where it was built; its rights first
            metrics_server.register(self.kubeconfig, control.address)
            metrics = self._spawn("metrics-server", metrics_server.argv(
                binaries() / "metrics-server", self.run_dir / "metrics-server.kubeconfig",
                control.address, self.run_dir / "metrics-server-certs"), control.ns)
        self._record(metrics_server=metrics is not None)
        for worker in workers:
            self._node(worker, images, cni)
        names = [w.name for w in workers]
        self._watch_nodes(names, timeout, ready=False)  # registered, given their pod CIDRs
        cni.start(self.kubeconfig, self._files(workers[0].name).view, len(workers))
        self._watch_nodes(names, timeout, ready=True)
        cni.wait(self.kubeconfig, timeout)
        if metrics:
            metrics_server.wait(self.kubeconfig, timeout, metrics.poll,
                                self.run_dir / "metrics-server.log", cni.pods_in)
        return self.kubeconfig

    def _control_plane(self, control: Node, creds: pki.Pki) -> None:
        for name, argv in control_plane.daemons(self.run_dir, binaries(), control.address,
                                                creds).items():
            self._spawn(name, argv, control.ns)

    def _dns(self, control: Node) -> None:
        """CoreDNS on the control-plane node, reading the API as system:coredns (only what
        it needs); the kubelets give pods its address."""
        corefile = control_plane.coredns(self.kubeconfig, self.run_dir)
        self._spawn("coredns", [str(binaries() / "coredns"), "-conf", str(corefile)],
                    control.ns)

    def _node(self, node: Node, images: list[Path], cni: PodNetwork) -> None:
        files = self._files(node.name)
        for path in (files.root, files.run):
            path.mkdir(parents=True, exist_ok=True)
        agent.prepare_view(files)
        # under the node's own cgroup, where the testbed puts its profile's CPU quota: the
        # pods are held to the node's CPU as its processes are
        cgroup_root = f"/k8sdds/{self.tb.spec.name}/{node.name}/kube"
        missing_dirs = [str(d) for d in cgroups.dirs(cgroup_root) if not d.exists()]
        self._record(cgroups=[cgroup_root], made=missing_dirs)
        cgroups.make_everywhere(cgroup_root)
        holder = self._spawn(f"{node.name}-holder", [
            "unshare", "--mount", "--propagation", "private", "sleep", "2147483647"], node.ns)
        procs.wait_own_mounts(holder)
        self._record(holders={**self._state().get("holders", {}), node.name: holder.pid},
                     namespaces=[procs.mount_namespace(holder.pid)])
        agent.mount_private(holder.pid, files, **cni.node_mounts(cgroup_root))
        (files.run / "containerd.toml").write_text(agent.containerd_config(files))
        cni.configure(node, files)
        (files.run / "resolv.conf").write_text("nameserver 127.0.0.1\n")
        containerd = self._spawn(f"{node.name}-containerd", agent.in_namespaces(
            holder.pid, ["containerd", "--config", str(files.run / "containerd.toml")]),
            env=cni.plugin_env(files.view))
        agent.wait_socket(files.socket, containerd, f"containerd on {node.name}")
        for image in images:
            _import(holder.pid, files, image, node.name)
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

    def _watch_nodes(self, names: list[str], timeout: float, ready: bool) -> None:
        """Watch the nodes until every one of `names` is registered (and Ready if `ready`);
        a node registered without a pod CIDR gets its testbed node's (as the controller
        manager's node IPAM would: the testbed's plan, so every CNI uses the same one)."""
        from kubernetes import client, config
        from kubernetes.client.exceptions import ApiException

        api = client.CoreV1Api(config.new_client_from_config(str(self.kubeconfig)))
        cidrs = {n.name: n.pod_cidr for n in self.tb.nodes}
        done: set[str] = set()
        why: dict[str, str] = {}  # the last reason a node gave for not being Ready
        for n in watched(api.list_node, timeout=timeout):
            name = n.metadata.name
            if not n.spec.pod_cidr and name in cidrs:
                try:
                    api.patch_node(name, {"spec": {"podCIDR": cidrs[name],
                                                   "podCIDRs": [cidrs[name]]}})
                except ApiException:
                    pass  # the node's next event brings it here again
                continue
            cond = ready_condition(n)
            is_ready = not ready or bool(cond and cond.status == "True")
            (done.add if is_ready else done.discard)(name)
            if cond and not is_ready:
                why[name] = f"{cond.reason}: {cond.message}"
            if set(names) <= done:
                return
        left = sorted(set(names) - done)
        raise TestbedError(f"nodes not {'Ready' if ready else 'registered'} within "
                           f"{timeout:g} s: " + "; ".join(
                               f"{name} ({why[name]})" if name in why else name
                               for name in left)
                           + f" (see {self.run_dir}/<node>-kubelet.log)")

    def load(self, archives: list[Path]) -> list[str]:
        """Import image archives into every worker's containerd (the cluster running)."""
        holders = self._state().get("holders", {})
        if not self.running() or not holders:
            raise TestbedError(f"testbed {self.tb.spec.name} runs no Kubernetes cluster "
                               "(k8sdds testbed up --kubernetes)")
        for name, pid in holders.items():
            files = self._files(name)
            for archive in archives:
                _import(pid, files, archive, name)
        return sorted(holders)

    def describe(self) -> dict:
        """What `testbed status` shows of the cluster: its CNI and kubeconfig."""
        state = self._state()
        return {"cni": state.get("cni", ""), "kubeconfig": str(self.kubeconfig),
                "metrics_server": bool(state.get("metrics_server"))}

    def nodes(self) -> list[dict]:
        """Each node's name, readiness (with the reason when not), kubelet, pod CIDR, pods."""
        from kubernetes import client, config

        api = client.CoreV1Api(config.new_client_from_config(str(self.kubeconfig)))
        pods = api.list_pod_for_all_namespaces(_request_timeout=5).items
        out = []
        for n in api.list_node(_request_timeout=5).items:
            cond = ready_condition(n)
            ready = ("yes" if cond and cond.status == "True"
                     else f"no: {cond.reason}" if cond else "no: not reported")
            out.append({"name": n.metadata.name, "ready": ready,
                        "kubelet": n.status.node_info.kubelet_version,
                        "pod_cidr": n.spec.pod_cidr or "-",
                        "pods": sum(p.spec.node_name == n.metadata.name for p in pods)})
        return out

    # ---- down ------------------------------------------------------------------------
    def down(self) -> None:
        """Every process (daemons, shims, containers), mount namespace, cgroup and file."""
        state = self._state()
        recorded = set(state.get("namespaces", [])) - {None}
        with procs.pinned(state.get("holders", {}).values(), recorded) as namespaces:
            procs.stop(state["pids"])
            procs.kill_namespaces(namespaces)  # the shims
        procs.kill_referring([self.data_dir])  # a kubelet started, never recorded
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


def ready_condition(node):
    """A V1Node's Ready condition, or None while its kubelet has not reported one."""
    return next((c for c in node.status.conditions or [] if c.type == "Ready"), None)


def _import(holder: int, files: agent.NodeFiles, archive: Path, node: str) -> None:
    proc = subprocess.run(agent.in_namespaces(holder, [
        "ctr", "--address", str(files.socket), "-n", "k8s.io", "images", "import",
        str(archive)]), capture_output=True, text=True)
    if proc.returncode != 0:
        raise TestbedError(f"import {Path(archive).name} on {node}: {proc.stderr.strip()}")
