"""One worker of a testbed cluster: containerd + runc + kubelet in the node's network
namespace and in one private mount namespace they share. What the kubelet would change on the
machine (host-wide sysctls, /run/containerd, /var/lib/cni) is shadowed inside that mount
namespace only, so the machine stays as it was."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from k8sdds import cni
from k8sdds.errors import TestbedError

# what the kubelet sets at start when it finds other values: shown to it as already set
KUBELET_SYSCTLS = {"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10",
                   "kernel/panic_on_oops": "1", "kernel/keys/root_maxkeys": "1000000",
                   "kernel/keys/root_maxbytes": "25000000"}
# Debian's plugins in each node's CNI bin directory (a CNI's own plugin joins them)
PLUGINS = ("bridge", "host-local", "loopback", "portmap", "bandwidth")
PAUSE = "localhost/k8sdds/pause:1"
# the node view: one path for every node, where each node's mount namespace shows that node's
# own directory (or file); what a DaemonSet's hostPath names (a CNI's configuration, plugins,
# state) is node-private, as on separate machines, and never this machine's /etc, /opt or /run
# (the CNI records' host paths: k8sdds/cni)
VIEW = {"net.d": "dir", "cni-bin": "dir", "xtables.lock": "file",
        **{name: "file" if name == record.testbed.node.machine_id else "dir"
           for record in cni.CNIS.values() if record.testbed
           for name in record.testbed.host_paths.values()
           if name not in ("net.d", "cni-bin", "xtables.lock")}}


# the capabilities by number (linux/capability.h), as a pod's securityContext names them
CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
    "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
    "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
    "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
    "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
    "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE")


def bounding_set(status: str | None = None) -> frozenset[str]:
    """The capabilities runc can give a container here: this process's bounding set (a
    sandbox may lack some, CAP_SYS_RESOURCE on this kind of machine). `status`: the text of
    /proc/self/status."""
    if status is None:
        status = Path("/proc/self/status").read_text()
    mask = next(int(line.split()[1], 16) for line in status.splitlines()
                if line.startswith("CapBnd:"))
    return frozenset(name for bit, name in enumerate(CAPABILITIES) if mask >> bit & 1)


@dataclass(frozen=True)
class NodeFiles:
    """Where a node keeps its own state (removed at down)."""

    root: Path  # /var/lib/k8sdds/<testbed>/<node>: images, snapshots, kubelet
    run: Path  # /run/k8sdds/<testbed>-kube/<node>: sockets, netns, logs
    view: Path  # /run/k8sdds/<testbed>-kube/node: the node view (same path on every node)

    @property
    def socket(self) -> Path:
        return self.run / "containerd.sock"

    def own(self, name: str) -> Path:
        """The node's own directory (or file) behind `view / name`."""
        return self.run / "view" / name


def prepare_view(files: NodeFiles) -> None:
    """The node view's mount points, and the node's own directories behind them; its CNI bin
    directory holds Debian's plugins."""
    for name, kind in VIEW.items():
        for path in (files.view / name, files.own(name)):
            if kind == "file":
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            else:
                path.mkdir(parents=True, exist_ok=True)
    for plugin in PLUGINS:
        link = files.own("cni-bin") / plugin
        if not link.is_symlink():
            link.symlink_to(Path(cni.DEBIAN_CNI) / plugin)


def containerd_config(files: NodeFiles) -> str:
    return f"""version = 2
root = "{files.root / 'containerd'}"
state = "{files.run / 'containerd'}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{files.socket}"
[ttrpc]
  address = "{files.run / 'containerd.sock.ttrpc'}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{files.root / 'opt'}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{files.view / 'cni-bin'}"
    conf_dir = "{files.view / 'net.d'}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
"""


def cni_config(pod_cidr: str, gateway: str, mtu: int, files: NodeFiles) -> str:
    """The bridge plugin on the node's cni0 (the testbed made it and routes its pod CIDR);
    no masquerade: cross-node pod traffic keeps its addresses."""
    import json

    return json.dumps({
        "cniVersion": "0.4.0", "name": "k8sdds",
        "plugins": [
            {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False,
             "mtu": mtu, "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": str(files.run / "ipam"),
                      "ranges": [[{"subnet": pod_cidr, "gateway": gateway}]],
                      "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}}]}, indent=1)


def kubelet_config(files: NodeFiles, cgroup_root: str, dns: str | None) -> str:
    import yaml

    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "failCgroupV1": False, "cgroupDriver": "cgroupfs", "cgroupRoot": cgroup_root,
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": f"unix://{files.socket}",
        "podLogsDir": str(files.root / "pod-logs"), "failSwapOn": False,
        "resolvConf": str(files.run / "resolv.conf"),
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False, "protectKernelDefaults": False,
        "healthzBindAddress": "127.0.0.1", "localStorageCapacityIsolation": False,
        "maxPods": 110, "makeIPTablesUtilChains": False,
    }
    if dns:
        config.update(clusterDNS=[dns], clusterDomain="cluster.local")
    return yaml.safe_dump(config)


def in_namespaces(holder: int, argv: list[str]) -> list[str]:
    """`argv` in the node's network namespace and its private mount namespace."""
    return ["nsenter", "-t", str(holder), "-m", "-n", "--", *argv]


# what the kubelet writes at fixed paths (/var/lib/kubelet/device-plugins, the
# /var/log/containers links): their trees are overlays in the node, whose upper layer is the
# node's; /var/lib/k8sdds (the node's own data) is moved back on top, as it was
OVERLAID = {"/var/lib": "/var/lib/k8sdds", "/var/log": None}


def mount_private(holder: int, files: NodeFiles, sysctls: Mapping[str, str] | None = None,
                  bpf_fs: bool = False, cgroup2: tuple[Path, str] | None = None) -> None:
    """Inside the node's mount namespace only: /var/lib and /var/log as overlays, its own
    /run/containerd, /var/lib/cni and node view, the sysctls the kubelet checks (and the CNI's
    machine-wide `sysctls`) shown with the values they want; with `bpf_fs` a BPF filesystem
    of its own at /sys/fs/bpf, with `cgroup2` (a cgroup v2 directory, a node-view name) that
    directory shown there as the node's cgroup2 root."""
    shadows = files.run / "sysctl"
    shadows.mkdir(parents=True, exist_ok=True)
    steps = []
    for tree, keep in OVERLAID.items():
        layer = files.run / "overlay" / tree.strip("/").replace("/", "-")
        for part in ("upper", "work", "keep"):
            (layer / part).mkdir(parents=True, exist_ok=True)
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            steps.append(["mount", "--bind", keep, str(layer / "keep")])
        steps.append(["mount", "-t", "overlay", "k8sdds-node", "-o",
                      f"lowerdir={tree},upperdir={layer / 'upper'},workdir={layer / 'work'}",
                      tree])
        if keep:
            steps.append(["mount", "--move", str(layer / "keep"), keep])
    for source, target in ((files.run / "run-containerd", "/run/containerd"),
                           (files.root / "var-lib-cni", "/var/lib/cni")):
        Path(source).mkdir(parents=True, exist_ok=True)
        steps.append(["mkdir", "-p", target])
        steps.append(["mount", "--bind", str(source), target])
    for name in VIEW:
        steps.append(["mount", "--bind", str(files.own(name)), str(files.view / name)])
    if bpf_fs:
        steps.append(["mount", "-t", "bpf", "k8sdds-node", "/sys/fs/bpf"])
    if cgroup2:
        steps.append(["mount", "--bind", str(cgroup2[0]), str(files.view / cgroup2[1])])
    for key, value in {**KUBELET_SYSCTLS, **(sysctls or {})}.items():
        shadow = shadows / key.replace("/", ".")
        shadow.write_text(value + "\n")
        steps.append(["mount", "--bind", str(shadow), f"/proc/sys/{key}"])
        steps.append(["mount", "-o", "remount,bind,ro", f"/proc/sys/{key}"])
    for argv in steps:
        proc = subprocess.run(["nsenter", "-t", str(holder), "-m", "--", *argv],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise TestbedError(f"{' '.join(argv)} in the node's mount namespace: "
                               f"{proc.stderr.strip()}")


def wait_socket(path: Path, proc: subprocess.Popen, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise TestbedError(f"{what} exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            raise TestbedError(f"{what} did not open {path} within {timeout:g} s")
        time.sleep(0.05)  # a socket appearing: no event to wait on


def proxy_config(kubeconfig: Path, node) -> str:
    """kube-proxy in iptables mode, in the node's network namespace; it changes no host-wide
    setting (conntrack sizes and timeouts left as they are)."""
    import yaml

    return yaml.safe_dump({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "mode": "iptables", "clientConnection": {"kubeconfig": str(kubeconfig)},
        "iptables": {"minSyncPeriod": "0s", "syncPeriod": "30s"},  # endpoints at once
        "hostnameOverride": node.name, "bindAddress": node.address,
        "clusterCIDR": "10.244.0.0/16", "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                      "tcpCloseWaitTimeout": "0s"},
        "nodePortAddresses": [f"{node.address}/32"]})
