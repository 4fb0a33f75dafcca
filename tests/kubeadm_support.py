"""Real kubeadm nodes for `k8sdds cluster images|init|join|reset`: each SSH test host
(tests/ssh_support.py) becomes a machine of its own, in its network namespace and one private
mount and UTS namespace that its sshd, containerd and kubelet share.

What kubeadm changes on a machine stays inside the node: /etc, /opt, /var, /run and
/usr/libexec are overlays whose upper layers are the node's directory (kubeadm writes
/etc/kubernetes, /var/lib/kubelet, /var/lib/etcd; the CNIs /etc/cni, /opt/cni, /run/flannel);
the host-wide sysctls the kubelet sets are shown to it as already set; containerd keeps its
images and snapshots in the node's directory; each kubelet has a cgroup root of its own.

The node's init system is the one stand-in: `kubelet-service` restarts the kubelet with the
flags kubeadm writes, as the kubeadm packages' systemd unit (10-kubeadm.conf) does, and a
`systemctl` first on the sessions' PATH starts, stops and reports it. kubeadm, kubelet,
kubectl, containerd, runc and every image are real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from k8sdds.testbed import cgroups
from k8sdds.testbed.kube import procs
from k8sdds.testbed.kube.node import KUBELET_SYSCTLS

from . import ssh_support as ss

BIN = Path(os.environ.get("K8SDDS_K8S_BIN", "/var/cache/k8sdds/bin"))
OVERLAID = ("/etc", "/opt", "/var", "/run", "/usr/libexec")
PAUSE = "registry.k8s.io/pause:3.10.1"  # kubeadm 1.34's sandbox image
SERVICE = "/run/kubelet-service"  # the init system's state, inside each node's /run

# the kubelet "unit": ExecStart of kubeadm's 10-kubeadm.conf, Restart=always
KUBELET_SERVICE = """#!{python}
import os, shlex, signal, subprocess, sys, time
STATE = {state!r}
os.makedirs(STATE, exist_ok=True)
log = open(sys.argv[1], "ab")

def env(path, name):
    try:
        for line in open(path):
            if line.startswith(name + "="):
                return shlex.split(line.split("=", 1)[1])
    except OSError:
        pass
    return []

def wanted():
    try:
        return open(STATE + "/wanted").read().strip()
    except OSError:
        return "started"  # enabled: started at boot, crash-looping until kubeadm configures it

signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    if wanted() != "started":
        time.sleep(0.2)
        continue
    argv = [{kubelet!r}, "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
            "--kubeconfig=/etc/kubernetes/kubelet.conf", "--config=/var/lib/kubelet/config.yaml",
            *env("/var/lib/kubelet/kubeadm-flags.env", "KUBELET_KUBEADM_ARGS"),
            *env("/etc/default/kubelet", "KUBELET_EXTRA_ARGS")]
    proc = subprocess.Popen(argv, stdout=log, stderr=log)
    open(STATE + "/pid", "w").write(str(proc.pid))
    try:
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
    time.sleep(1)  # RestartSec
"""

# `systemctl` as kubeadm uses it (daemon-reload, start, restart, stop, status, is-active,
# is-enabled, enable), for the kubelet only
SYSTEMCTL = """#!{python}
import os, signal, sys, time
STATE = {state!r}
args = [a for a in sys.argv[1:] if not a.startswith("-")]
verb, unit = (args + ["", ""])[:2]
unit = unit.removesuffix(".service")
if verb == "daemon-reload":
    sys.exit(0)
if unit != "kubelet":
    print(f"Unit {{unit}}.service could not be found.")
    sys.exit(4)

def pid():
    try:
        p = int(open(STATE + "/pid").read())
        os.kill(p, 0)
        return p
    except (OSError, ValueError):
        return None

def want(state):
    os.makedirs(STATE, exist_ok=True)
    open(STATE + "/wanted", "w").write(state)

if verb in ("start", "restart"):
    want("started")
    if verb == "restart" and pid():
        os.kill(pid(), signal.SIGTERM)
elif verb == "stop":
    want("stopped")
    p = pid()
    if p:
        os.kill(p, signal.SIGTERM)
        for _ in range(100):
            if pid() is None:
                break
            time.sleep(0.1)
elif verb in ("status", "is-active"):
    active = pid() is not None
    print(("Loaded: loaded\\nActive: " if verb == "status" else "") +
          ("active" if active else "inactive"))
    sys.exit(0 if active else 3)
elif verb not in ("enable", "is-enabled"):
    sys.exit(1)
"""


def missing() -> str | None:
    """Why real kubeadm nodes cannot run here, or None."""
    reason = ss.missing()
    if reason:
        return reason
    lacking = [b for b in ("kubeadm", "kubelet", "kubectl", "crictl", "kube-apiserver",
                           "etcd", "coredns", "flanneld") if not (BIN / b).exists()]
    if lacking:
        return f"{', '.join(lacking)} not built in {BIN} (make test-deps)"
    for tool in ("containerd", "runc", "nsenter", "unshare"):
        if not shutil.which(tool):
            return f"needs {tool} (make test installs it)"
    return None


@dataclass
class Nodes(ss.Hosts):
    """SSH test hosts that are real kubeadm nodes (see the module's text)."""

    holders: dict[int, subprocess.Popen] = field(default_factory=dict)
    daemons: list[subprocess.Popen] = field(default_factory=list)

    def cgroup_root(self, i: int) -> str:
        return f"/k8sdds-kubeadm/{self.ns(i)}"

    def node_dir(self, i: int) -> Path:
        return self.directory / f"node{i}"

    def enter(self, i: int) -> list[str]:
        if i not in self.holders:
            self._boot(i)
        return ["nsenter", "-t", str(self.holders[i].pid), "-m", "-n", "-u", "--"]

    def in_node(self, i: int, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([*self.enter(i), *argv], capture_output=True, text=True,
                              check=check)

    def path(self, i: int, inside: str) -> Path:
        """A file of node i as this machine reaches it (through its holder's root)."""
        return Path(f"/proc/{self.holders[i].pid}/root") / inside.lstrip("/")

    def _boot(self, i: int) -> None:
        d = self.node_dir(i)
        d.mkdir(parents=True, exist_ok=True)
        holder = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{self.ns(i)}", "unshare", "--mount", "--uts",
             "--propagation", "private", "sleep", "2147483647"],
            stdin=subprocess.DEVNULL, start_new_session=True)
        procs.wait_own_mounts(holder)
        self.holders[i] = holder
        # what Kubernetes asks of every node's network (kubeadm's preflight checks it): IPv4
        # forwarding, which Weave Net, unlike flannel and kube-router, leaves to the host; in
        # the node's own network namespace, so this machine's setting is untouched
        subprocess.run(["nsenter", f"--net=/run/netns/{self.ns(i)}", "sysctl", "-qw",
                        "net.ipv4.ip_forward=1"], check=True)
        mnt = ["nsenter", "-t", str(holder.pid), "-m", "-u", "--"]
        steps = [["hostname", f"h{i}"]]
        for tree in OVERLAID:
            name = tree.strip("/").replace("/", "-")
            upper, work = d / "overlay" / name / "upper", d / "overlay" / name / "work"
            upper.mkdir(parents=True, exist_ok=True)
            work.mkdir(parents=True, exist_ok=True)
            steps.append(["mount", "-t", "overlay", f"k8sdds-{name}", "-o",
                          f"lowerdir={tree},upperdir={upper},workdir={work}", tree])
        steps.append(["mount", "--make-rshared", "/"])  # as systemd makes it (the kubelet
        # wants its root directory shared); a peer group of the node's own
        for key, value in KUBELET_SYSCTLS.items():
            shadow = d / "sysctl" / key.replace("/", ".")
            shadow.parent.mkdir(parents=True, exist_ok=True)
            shadow.write_text(value + "\n")
            steps += [["mount", "--bind", str(shadow), f"/proc/sys/{key}"],
                      ["mount", "-o", "remount,bind,ro", f"/proc/sys/{key}"]]
        for argv in steps:
            subprocess.run([*mnt, *argv], check=True, capture_output=True)
        # the machine's own files: the node's resolver, its machine id (Weave Net names its
        # peer from it: hosts sharing one collide), kubelet extra flags, CNI plugins
        files = {"/etc/resolv.conf": f"nameserver 10.{self.net}.0.1\n",
                 "/etc/machine-id": uuid.uuid4().hex + "\n",
                 "/etc/default/kubelet":
                 f"KUBELET_EXTRA_ARGS=--cgroup-root={self.cgroup_root(i)}\n"}
        for inside, text in files.items():
            target = self.path(i, inside)
            target.unlink(missing_ok=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        plugins = self.path(i, "/opt/cni/bin")
        plugins.mkdir(parents=True, exist_ok=True)
        for plugin in Path("/usr/lib/cni").iterdir():
            shutil.copy2(plugin, plugins / plugin.name)
        cgroups.make_everywhere(self.cgroup_root(i))
        self._containerd(i, d)
        self._kubelet_service(i, d)

    def _containerd(self, i: int, d: Path) -> None:
        (d / "containerd.toml").write_text(f"""version = 2
root = "{d / 'containerd-root'}"
state = "{d / 'containerd-state'}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d / 'containerd-opt'}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
""")
        proc = subprocess.Popen([*self.enter(i), "containerd", "--config",
                                 str(d / "containerd.toml")], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=open(d / "containerd.log", "wb"),
                                start_new_session=True)
        self.daemons.append(proc)
        from k8sdds.testbed.kube.node import wait_socket

        wait_socket(self.path(i, "/run/containerd/containerd.sock"), proc, "containerd")

    def _kubelet_service(self, i: int, d: Path) -> None:
        bin_dir = self.standins
        assert bin_dir is not None
        service = bin_dir / "kubelet-service"
        if not service.exists():
            service.write_text(KUBELET_SERVICE.format(python=sys.executable, state=SERVICE,
                                                      kubelet=str(BIN / "kubelet")))
            service.chmod(0o755)
        self.daemons.append(subprocess.Popen(
            [*self.enter(i), str(service), str(d / "kubelet.log")], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=open(d / "kubelet-service.log", "wb"),
            start_new_session=True))

    def admin_conf(self, i: int = 1) -> Path:
        """The control plane's admin.conf, copied out (its server is reachable from here)."""
        target = self.directory / "admin.conf"
        shutil.copyfile(self.path(i, "/etc/kubernetes/admin.conf"), target)
        return target

    def down(self) -> list[int]:
        """Stop everything the nodes run; what is still running in their namespaces after
        (nothing, or a leak to report)."""
        holders = [h.pid for h in self.holders.values()]
        # held open throughout: a namespace that ends gives its number to the next one made
        # (by the other test process, say), which would be taken for a node's
        with procs.pinned(holders) as namespaces:
            # the kubelets first (they restart containers), then the containers, containerd
            procs.stop([p.pid for p in self.daemons if "kubelet-service" in " ".join(p.args)])
            for i in self.holders:
                subprocess.run([*self.enter(i), "sh", "-c",
                                "for c in $(ctr -n k8s.io tasks ls -q); do "
                                "ctr -n k8s.io tasks kill -s KILL $c; done"],
                               capture_output=True, timeout=60)
            for i in self.holders:
                cgroups.remove_everywhere(self.cgroup_root(i))
            procs.stop([p.pid for p in self.daemons])
            procs.kill_namespaces(namespaces)  # containerd's shims, and anything else left
            super().down()
            procs.stop(holders)
            # containerd's snapshots may still be mounted in the (gone) namespaces
            for i in self.holders:
                shutil.rmtree(self.node_dir(i), ignore_errors=True)
            cgroups.remove_everywhere("/k8sdds-kubeadm")
            return procs.in_namespaces(namespaces)


def make(directory: Path, prefix: str, net: int) -> Nodes:
    """Three nodes (h1 the control plane) with kubeadm, kubelet, kubectl, crictl (as
    kubeadm's packages install them) and the init system stand-in on the sessions' PATH."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in ("kubeadm", "kubelet", "kubectl", "crictl"):
        (bin_dir / name).symlink_to(BIN / name)
    (bin_dir / "systemctl").write_text(SYSTEMCTL.format(python=sys.executable, state=SERVICE))
    (bin_dir / "systemctl").chmod(0o755)
    return Nodes(directory / "hosts", prefix, count=3, serving=(1, 2, 3), standins=bin_dir,
                 net=net)
