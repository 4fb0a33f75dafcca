"""A real Kubernetes control plane for the kubernetes backend's tests and benchmarks.

Debian's etcd, a kube-apiserver built from the k8s.io/kubernetes Go module, and kwok, which
plays the kubelets of simulated nodes: it moves pods through their states by Stages and
serves their logs (from files) through the API server, as a kubelet would. Binaries come
from `.ci/k8s-test-binaries` (cached under /var/cache/k8sdds/bin or $K8SDDS_K8S_BIN).
No scheduler and no controller-manager run: k8sdds pins its pods to nodes itself, and
deletes its objects itself, so neither is needed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from k8sdds.testbed.kube import pki

BIN = Path(os.environ.get("K8SDDS_K8S_BIN", "/var/cache/k8sdds/bin"))
FIXTURES = Path(__file__).parent / "fixtures"

# images the test Stages give a fate to (no image is ever pulled: kwok plays the kubelet)
IMAGE_OK = "k8sdds-test/engines:ok"  # runs 1.5 s, exits 0
IMAGE_HANG = "k8sdds-test/engines:hang"  # runs until deleted
IMAGE_CRASH = "k8sdds-test/engines:crash"  # exits 3 at once
IMAGE_MISSING = "k8sdds-test/engines:missing"  # ErrImagePull, never runs

# what kwok serves as each container's log: real ddsperf output
LOGS = {"pub": FIXTURES / "ddsperf" / "throughput-pub-hostgw-1k.log",
        **{f"sub{i}": FIXTURES / "ddsperf" / "throughput-sub-hostgw-1k.log" for i in range(8)},
        "client": FIXTURES / "network" / "iperf3-tcp-client.json",
        "server": FIXTURES / "network" / "iperf3-tcp-server.json"}


def _die_with_parent() -> None:
    """The control plane goes when the test process goes, however it goes (Linux)."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def missing() -> str | None:
    """Why the control plane cannot run here, or None."""
    for name in ("kube-apiserver", "kwok"):
        if not (BIN / name).exists():
            return f"{BIN / name} not built (run .ci/k8s-test-binaries)"
    if shutil.which("etcd") is None:
        return "etcd not installed (apt-get install etcd-server)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stage(name: str, selector: list[dict], template: str, delay_ms: int = 0,
           delete: bool = False) -> dict:
    spec: dict = {"resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                  "selector": {"matchExpressions": selector}, "next": {}}
    if template:
        spec["next"]["statusTemplate"] = template
    if delete:
        spec["next"] = {"finalizers": {"empty": True}, "delete": True}
    if delay_ms:
        spec["delay"] = {"durationMilliseconds": delay_ms}
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
            "metadata": {"name": name}, "spec": spec}


ALIVE = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}


def _image(op: str, *images: str) -> dict:
    return {"key": ".spec.containers.[0].image", "operator": op, "values": list(images)}


def _container(op: str, *names: str) -> dict:
    return {"key": ".spec.containers.[0].name", "operator": op, "values": list(names)}


RUNNING = """{{ $now := Now }}
conditions:
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Initialized}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Ready}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: ContainersReady}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""

TERMINATED = """{{ $now := Now }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  state:
    terminated:
      exitCode: EXIT
      finishedAt: {{ $now | Quote }}
      reason: REASON
      startedAt: {{ $now | Quote }}
{{ end }}
phase: PHASE
"""

PULL_ERROR = """containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  state:
    waiting:
      reason: ErrImagePull
      message: 'failed to pull and unpack image "{{ .image }}": not found'
{{ end }}
phase: Pending
"""


def kwok_config(logs: dict[str, Path]) -> list[dict]:
    """Pod Stages by image (see IMAGE_*), and each role's log file."""
    pending_only = {"key": ".status.containerStatuses", "operator": "DoesNotExist"}
    running = {"key": ".status.phase", "operator": "In", "values": ["Running"]}
    docs = [
        {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
         "options": {}},
        _stage("k8sdds-pull-error", [ALIVE, pending_only, _image("In", IMAGE_MISSING)],
               PULL_ERROR),
        _stage("k8sdds-ready", [ALIVE, {"key": ".status.podIP", "operator": "DoesNotExist"},
                                _image("NotIn", IMAGE_MISSING)], RUNNING),
        # a fingerprint probe pod (its container is `probe`) prints and exits, as on a kubelet
        _stage("k8sdds-probe-done", [ALIVE, running, _container("In", "probe")],
               TERMINATED.replace("EXIT", "0").replace("REASON", "Completed")
               .replace("PHASE", "Succeeded"), delay_ms=200),
        _stage("k8sdds-complete", [ALIVE, running, _image("In", IMAGE_OK),
                                   _container("NotIn", "probe")],
               TERMINATED.replace("EXIT", "0").replace("REASON", "Completed")
               .replace("PHASE", "Succeeded"), delay_ms=1500),
        _stage("k8sdds-crash", [ALIVE, running, _image("In", IMAGE_CRASH),
                                _container("NotIn", "probe")],
               TERMINATED.replace("EXIT", "3").replace("REASON", "Error")
               .replace("PHASE", "Failed"), delay_ms=300),
        _stage("k8sdds-delete", [{"key": ".metadata.deletionTimestamp",
                                  "operator": "Exists"}], "", delete=True),
        # exec runs the asked command on this machine, as a kubelet would in the container
        {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterExec",
         "metadata": {"name": "k8sdds-exec"},
         "spec": {"execs": [{"local": {"workDir": "/tmp"}}]}},
        {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs",
         "metadata": {"name": "k8sdds-logs"},
         "spec": {"logs": [{"containers": [role], "logsFile": str(path)}
                           for role, path in logs.items()]}},
    ]
    return docs


def cri_log(source: Path, directory: Path) -> Path:
    """`source` as the container runtime writes a log (CRI format: time, stream, tag, line),
    which is what a kubelet, and kwok, read and serve without the prefix."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / source.name
    if not out.exists():
        lines = source.read_text().splitlines()
        out.write_text("".join(f"2026-11-21T12:00:00.{i:09d}Z stdout F {line}\n"
                               for i, line in enumerate(lines)))
    return out


@dataclass
class ControlPlane:
    """etcd + kube-apiserver + kwok in `directory`; `kubeconfig` is an admin's."""

    directory: Path
    logs: dict[str, Path] = field(default_factory=lambda: dict(LOGS))
    procs: list[subprocess.Popen] = field(default_factory=list)
    kubeconfig: Path = Path()
    server: str = ""
    ca: Path = Path()  # the CA the API server's certificate is signed by
    token: str = ""  # the admin's bearer token

    def start(self) -> ControlPlane:
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        etcd_port, peer_port, api_port, kubelet_port = (free_port() for _ in range(4))
        self._spawn("etcd", ["etcd", "--data-dir", str(d / "etcd"), "--name", "k8sdds-test",
                             "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
                             "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
                             "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
                             "--initial-cluster", f"k8sdds-test=http://127.0.0.1:{peer_port}",
                             "--quota-backend-bytes", str(2 * 2**30)])
        # the same credentials as a testbed cluster's: a CA, the serving certificate, the
        # ServiceAccount key, a static admin token
        creds = pki.make(d / "pki", "127.0.0.1", {"admin": ("admin", "system:masters")})
        self.ca, self.token = creds.ca, creds.tokens["admin"]
        self._spawn("kube-apiserver", [
            str(BIN / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}", f"--tls-cert-file={creds.directory / 'apiserver.crt'}",
            f"--tls-private-key-file={creds.directory / 'apiserver.key'}",
            f"--token-auth-file={creds.directory / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={creds.directory / 'sa.pub'}",
            f"--service-account-signing-key-file={creds.directory / 'sa.key'}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--kubelet-preferred-address-types=InternalIP",
            "--max-requests-inflight=1000", "--max-mutating-requests-inflight=500",
            "--enable-priority-and-fairness=false",
            # etcd 3.4 lacks progress notifications: no streaming list (kwok would retry)
            "--feature-gates=WatchList=false",
            f"--cert-dir={d / 'certs'}"])
        self.server = f"https://127.0.0.1:{api_port}"
        self.kubeconfig = d / "kubeconfig"
        self.kubeconfig.write_text(pki.kubeconfig(creds, self.server, "admin"))
        self._wait_api()
        # what a fingerprint probe pod prints: the probe script run on this machine
        from k8sdds.fingerprint import probe_script

        probe = d / "probe.log"
        probe.write_text(subprocess.run(["sh", "-c", probe_script()], capture_output=True,
                                        text=True, timeout=60).stdout)
        logs = {**self.logs, "probe": probe}
        (d / "kwok.yaml").write_text(yaml.safe_dump_all(kwok_config(
            {role: cri_log(path, d / "cri") for role, path in logs.items()})))
        self._spawn("kwok", [str(BIN / "kwok"), f"--kubeconfig={self.kubeconfig}",
                             f"--config={d / 'kwok.yaml'}", "--manage-all-nodes=true",
                             "--node-ip=127.0.0.1", f"--node-port={kubelet_port}",
                             f"--server-address=127.0.0.1:{kubelet_port}",
                             "--cidr=10.244.0.1/16"],
                    env={"KUBE_FEATURE_WatchListClient": "false"})
        return self

    def _spawn(self, name: str, argv: list[str], env: dict | None = None) -> None:
        log = open(self.directory / f"{name}.log", "wb")
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                           env={**os.environ, **(env or {})},
                                           start_new_session=True, preexec_fn=_die_with_parent))

    def _wait_api(self, timeout: float = 90) -> None:
        from k8sdds.testbed.kube.control_plane import wait_readyz

        def alive() -> None:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited: see {self.directory}")

        if not wait_readyz(self.server, self.ca, self.token, timeout, alive):
            raise RuntimeError(f"kube-apiserver not ready in {timeout} s: see "
                               f"{self.directory / 'kube-apiserver.log'}")

    def api(self):
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def add_nodes(self, nodes: list[dict]) -> None:
        """Nodes as a kubelet would register them; kwok makes them Ready."""
        from kubernetes import client

        core = client.CoreV1Api(self.api())
        for n in nodes:
            core.create_node(n)
        self.wait_ready([n["metadata"]["name"] for n in nodes])

    def wait_ready(self, names: list[str], timeout: float = 60) -> None:
        from kubernetes import client, watch

        core = client.CoreV1Api(self.api())
        left = set(names)
        w = watch.Watch()
        for event in w.stream(core.list_node, timeout_seconds=int(timeout)):
            node = event["raw_object"]
            conds = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
            if conds.get("Ready") == "True":
                left.discard(node["metadata"]["name"])
            if not left:
                w.stop()
                return
        raise RuntimeError(f"nodes not Ready in {timeout} s: {sorted(left)}")

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def node(name: str, arch: str, control_plane: bool = False,
         kernel: str = "6.1.0-rpi7-rpi-v8") -> dict:
    """A node as an edge cluster's: labels, taint, node info."""
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/arch": arch,
              "kubernetes.io/os": "linux", "type": "kwok"}
    spec: dict = {}
    if control_plane:
        labels["node-role.kubernetes.io/control-plane"] = ""
        spec["taints"] = [{"key": "node-role.kubernetes.io/control-plane",
                           "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": spec,
            "status": {"nodeInfo": {"architecture": arch, "kernelVersion": kernel,
                                    "bootID": "", "machineID": "", "systemUUID": "",
                                    "kubeProxyVersion": "",
                                    "kubeletVersion": "v1.34.3", "operatingSystem": "linux",
                                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                                    "containerRuntimeVersion": "containerd://1.7.24"},
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


EDGE = [node("master", "amd64", control_plane=True, kernel="6.1.0-28-amd64"),
        node("pi4-a", "arm64"), node("pi4-b", "arm64"), node("pi3-a", "arm",
                                                               kernel="6.1.0-rpi7-rpi-v7")]


# where a kubelet, kubeadm, the controller manager or a CNI write at fixed paths: none of
# them may appear (or change) on this machine
FIXED_PATHS = ("/etc/kubernetes", "/etc/cni", "/opt/cni", "/run/flannel", "/var/lib/kubelet",
               "/var/lib/etcd", "/usr/libexec/kubernetes", "/run/xtables.lock",
               "/var/log/pods", "/var/log/containers", "/run/kubernetes")


def fixed_paths() -> dict:
    """Each fixed path's listing (None when absent)."""
    from pathlib import Path

    def listing(p: str):
        path = Path(p)
        if not path.exists():
            return None
        return sorted(str(x) for x in path.rglob("*")) if path.is_dir() else "file"

    return {p: listing(p) for p in FIXED_PATHS}
