"""Real kubeadm nodes for `k8sdds cluster images|init|join|reset`: each SSH test host
(tests/ssh_support.py) becomes a machine of its own, in its network namespace and one private
mount and UTS namespace that its sshd, containerd and kubelet share.

What kubeadm changes on a machine stays inside the node: /etc, /opt, /var, /run and
/usr/libexec are overlays whose upper layers are the node's directory (kubeadm writes
/etc/kubernetes, /var/lib/kubelet, /var/lib/etcd; the CNIs /etc/cni, /opt/cni, /run/flannel);
the host-wide sysctls the kubelet sets are shown to it as already set; containerd keeps its
images and snapshots in the node's directory; each kubelet has a cgroup root of its own.

The nodes start without Kubernetes parts: `k8sdds cluster install` puts kubelet, kubeadm
(and kubectl) into /usr/local/bin, its units and containerd's configuration into /etc, the CNI
plugins into /opt/cni/bin (overlaid too, so nothing reaches this machine); containerd, runc and
the CNI plugins are this machine's packages, which the node's dpkg reports as installed.

The node's init system is the one stand-in: `kubelet-service` runs /usr/local/bin/kubelet with
the flags kubeadm writes, as the drop-in `cluster install` writes (10-kubeadm.conf) says, and
a `systemctl` first on the sessions' PATH enables, starts, stops and reports it. The node's
containerd is started here with the node's own root and state (containerd's snapshots cannot
live on an overlay), so `systemctl` acknowledges containerd and the kubelet gets cgroupfs and
the node's cgroup root after the flags /etc/default/kubelet gives. kubeadm, kubelet, kubectl,
containerd, runc and every image are real.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from k8sdds.testbed import cgroups
from k8sdds.testbed.kube import procs
from k8sdds.testbed.kube.node import KUBELET_SYSCTLS

from . import ssh_support as ss
from .emulated_support import host_mounts, root_links
from .kube_support import fixed_paths

BIN = Path(os.environ.get("K8SDDS_K8S_BIN", "/var/cache/k8sdds/bin"))
OVERLAID = ("/etc", "/opt", "/var", "/run", "/usr/libexec", "/usr/local")
PAUSE = "registry.k8s.io/pause:3.10.1"  # kubeadm 1.34's sandbox image
SERVICE = "/run/kubelet-service"  # the init system's state, inside each node's /run

# the kubelet "unit": ExecStart of 10-kubeadm.conf (`cluster install`'s), Restart=always; then
# the test node's cgroup driver and root (argv[2]), which the last flag given sets
KUBELET_SERVICE = """#!{python}
import os, shlex, signal, subprocess, sys, time
STATE = {state!r}
KUBELET = "/usr/local/bin/kubelet"  # where `k8sdds cluster install` puts it
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
        return "stopped"  # not started since boot

signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    if wanted() != "started" or not os.path.exists(KUBELET):
        time.sleep(0.2)
        continue
    argv = [KUBELET, "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
            "--kubeconfig=/etc/kubernetes/kubelet.conf", "--config=/var/lib/kubelet/config.yaml",
            *env("/var/lib/kubelet/kubeadm-flags.env", "KUBELET_KUBEADM_ARGS"),
            *env("/etc/default/kubelet", "KUBELET_EXTRA_ARGS"),
            "--cgroup-driver=cgroupfs", "--cgroup-root=" + sys.argv[2]]
    proc = subprocess.Popen(argv, stdout=log, stderr=log)
    open(STATE + "/pid", "w").write(str(proc.pid))
    try:
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
    time.sleep(1)  # RestartSec
"""

# `systemctl` as kubeadm and `cluster install` use it (daemon-reload, enable [--now],
# disable [--now], start, restart, stop, status, is-active, is-enabled) for the kubelet; the
# node's containerd runs throughout (see the module's text)
SYSTEMCTL = """#!{python}
import os, signal, sys, time
STATE = {state!r}
now = "--now" in sys.argv
args = [a for a in sys.argv[1:] if not a.startswith("-")]
verb, units = (args + [""])[0], [u.removesuffix(".service") for u in args[1:]]
if verb == "daemon-reload":
    sys.exit(0)
os.makedirs(STATE, exist_ok=True)

def pid():
    try:
        p = int(open(STATE + "/pid").read())
        os.kill(p, 0)
        return p
    except (OSError, ValueError):
        return None

def want(state):
    open(STATE + "/wanted", "w").write(state)

def stop():
    want("stopped")
    p = pid()
    if p:
        os.kill(p, signal.SIGTERM)
        for _ in range(100):
            if pid() is None:
                break
            time.sleep(0.1)

code = 0
for unit in units:
    if unit == "containerd":
        continue
    if unit != "kubelet":
        print(f"Unit {{unit}}.service could not be found.")
        sys.exit(4)
    enabled = os.path.exists(STATE + "/enabled")
    if verb == "enable":
        open(STATE + "/enabled", "w").close()
        if now:
            want("started")
    elif verb == "disable":
        if enabled:
            os.unlink(STATE + "/enabled")
        if now:
            stop()
    elif verb in ("start", "restart"):
        want("started")
        if verb == "restart" and pid():
            os.kill(pid(), signal.SIGTERM)
    elif verb == "stop":
        stop()
    elif verb in ("status", "is-active"):
        active = pid() is not None
        print(("Loaded: loaded\\nActive: " if verb == "status" else "") +
              ("active" if active else "inactive"))
        code = code or (0 if active else 3)
    elif verb == "is-enabled":
        print("enabled" if enabled else "disabled")
        code = code or (0 if enabled else 1)
    else:
        sys.exit(1)
sys.exit(code)
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

    @property
    def cgroup_parent(self) -> str:
        """The node set's cgroup (two sets at once, one per test process, each its own)."""
        return f"/k8sdds-kubeadm-{self.prefix}"

    def cgroup_root(self, i: int) -> str:
        return f"{self.cgroup_parent}/{self.ns(i)}"

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
        # peer from it: hosts sharing one collide)
        files = {"/etc/resolv.conf": f"nameserver 10.{self.net}.0.1\n",
                 "/etc/machine-id": uuid.uuid4().hex + "\n"}
        for inside, text in files.items():
            target = self.path(i, inside)
            target.unlink(missing_ok=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
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
            service.write_text(KUBELET_SERVICE.format(python=sys.executable, state=SERVICE))
            service.chmod(0o755)
        self.daemons.append(subprocess.Popen(
            [*self.enter(i), str(service), str(d / "kubelet.log"), self.cgroup_root(i)],
            stdin=subprocess.DEVNULL,
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
            cgroups.remove_everywhere(self.cgroup_parent)
            return procs.in_namespaces(namespaces)


def make(directory: Path, prefix: str, net: int) -> Nodes:
    """Three nodes (h1 the control plane) with crictl and the init system stand-in on the
    sessions' PATH, /usr/local/bin (the node's own) after them; no kubelet, kubeadm or kubectl
    until `k8sdds cluster install`."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "crictl").symlink_to(BIN / "crictl")
    (bin_dir / "systemctl").write_text(SYSTEMCTL.format(python=sys.executable, state=SERVICE))
    (bin_dir / "systemctl").chmod(0o755)
    return Nodes(directory / "hosts", prefix, count=3, serving=(1, 2, 3), standins=bin_dir,
                 net=net, local=True)


# what the test nodes need of kubeadm's configuration: cgroup v1 with cgroupfs, no swap
# check, the kubelet's and kube-proxy's host-wide settings left alone (see kubeadm_support)
NODE_CONFIG = [
    {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
     "cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False,
     "protectKernelDefaults": False, "localStorageCapacityIsolation": False,
     "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%",
                      "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
     "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99},
    {"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
     "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                   "tcpCloseWaitTimeout": "0s"}}]
# a node's state, as reset must leave it: files (not directories: kubeadm's packages own
# /etc/kubernetes), links, routes, iptables rules and chains (empty built-in chains are no
# rules), containers, mounts (but the network namespaces test processes hold on this machine:
# make test runs two at once; a second cluster of theirs is named with a letter after its
# number, kk841b-node0; the ARM image tests' are k8sdds-arm-PID), and of /var/lib/k8sdds only
# what `cluster install` keeps there (node/: the other process's testbed clusters write
# beside it)
SNAPSHOT = r"""
for p in /etc/kubernetes /etc/cni /var/lib/kubelet /var/lib/etcd /var/lib/cni /run/flannel \
         /opt/cni/bin /var/lib/kube-router /var/lib/weave /usr/local/bin /var/lib/k8sdds/node \
         /etc/containerd /etc/default/kubelet /etc/modules-load.d /etc/sysctl.d \
         /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d; do
  [ -e $p ] && find $p ! -type d; done | sort
ipset list -n | sort
ip -o link 2>/dev/null | awk '{print $2}' | sed 's/@.*//'
ip -4 route
iptables-save | grep -E '^(-A |:[^ ]+ - )' | sed 's/ \[[0-9:]*\]$//'
ip6tables-save | grep -E '^(-A |:[^ ]+ - )' | sed 's/ \[[0-9:]*\]$//'
ctr -n k8s.io containers ls -q 2>/dev/null
dpkg-query -W -f '${Package} ${Status}\n' containerd runc containernetworking-plugins 2>&1
awk '{print $5}' /proc/self/mountinfo | grep -v '^/proc/sys/' \
  | grep -v -E '^/run/netns/([a-z]{2,6}[0-9]{1,3}[a-z]?-|k8sdds-)' | sort
"""

SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops",
           "net/ipv4/ip_forward", "net/netfilter/nf_conntrack_max")


def host_state(prefix: str) -> dict:
    """This machine's state where kubeadm, the kubelet and flannel would write."""
    sysctls = {}
    for key in SYSCTLS:
        try:
            sysctls[key] = Path(f"/proc/sys/{key}").read_text()
        except OSError:
            sysctls[key] = None
    return {"paths": fixed_paths(), "sysctls": sysctls,
            "links": sorted(root_links(prefix)),
            "mounts": sorted(host_mounts(prefix)),
            "cgroups": sorted(str(p) for p in
                              Path("/sys/fs/cgroup").glob(f"*/k8sdds-kubeadm-{prefix}"))}


def cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "k8sdds", *args], capture_output=True,
                          text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "250",
                               "PYTHONPATH": str(Path(__file__).parent.parent)})



@contextlib.contextmanager
def node_set(directory: Path, prefix: str, net: int) -> Iterator[Nodes]:
    """Three nodes up for the block; after it, nothing of theirs left: no shim, container or
    daemon, and nothing of kubeadm's, the kubelet's or a CNI's on this machine."""
    before = host_state(prefix)
    n = make(directory, prefix, net=net)
    try:
        yield n.up()
    finally:
        left = n.down()
    assert left == []
    assert host_state(prefix) == before


def snapshot(nodes, i: int) -> str:
    return nodes.in_node(i, "sh", "-c", SNAPSHOT).stdout


