"""What `k8sdds cluster install` writes on a host, and where: the paths, the kubeadm
packages' unit and drop-in (the kubelet in /usr/local/bin), containerd's configuration, the
kernel modules and sysctls kubeadm's preflight checks. Data only: install.py does the work."""

from __future__ import annotations

from dataclasses import dataclass

STATE = "/var/lib/k8sdds/node"  # on the host: what install did, and the files it replaced
RECORD = f"{STATE}/install.json"
KEPT = f"{STATE}/kept"
BIN = "/usr/local/bin"
CNI_BIN = "/opt/cni/bin"  # where containerd and the CNIs' DaemonSets look for plugins
PARTS = ("kubelet", "kubeadm")
CONTROL_PLANE_PARTS = ("kubectl",)  # workers have no admin kubeconfig to use it with
PLUGINS = ("bridge", "host-local", "loopback", "portmap")  # what the CNIs' configs call
PAUSE = "registry.k8s.io/pause:3.10.1"  # kubeadm 1.34's sandbox image
# each kernel module kubeadm's preflight wants, and how its presence shows (a module built
# into the kernel has no /sys/module entry when it takes no parameter)
MODULES = (("overlay", ("grep", "-qw", "overlay", "/proc/filesystems")),
           ("br_netfilter", ("test", "-d", "/proc/sys/net/bridge")))
SYSCTLS = (("net.ipv4.ip_forward", "1"), ("net.bridge.bridge-nf-call-iptables", "1"))


@dataclass(frozen=True)
class NodeFile:
    """A file install writes on every host: its path, text and mode."""

    path: str
    text: str
    mode: int = 0o644


# the unit and drop-in of kubeadm's packages (kubernetes/release, packages/deb), the kubelet
# in /usr/local/bin
KUBELET_UNIT = f"""[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart={BIN}/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
"""
KUBEADM_DROPIN = f"""# from k8sdds cluster install: kubeadm's drop-in, as its packages install it
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart={BIN}/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""  # noqa: E501 (systemd reads one line)
CRI = '[plugins."io.containerd.grpc.v1.cri"'
CONTAINERD_CONFIG = f"""# from k8sdds cluster install: containerd for a kubeadm node
version = 2
{CRI}]
  sandbox_image = "{PAUSE}"
{CRI}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "/etc/cni/net.d"
{CRI}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
{CRI}.containerd.runtimes.runc.options]
  SystemdCgroup = true
"""
FILES = (
    NodeFile("/etc/systemd/system/kubelet.service", KUBELET_UNIT),
    NodeFile("/etc/systemd/system/kubelet.service.d/10-kubeadm.conf", KUBEADM_DROPIN),
    # the kubelet's cgroups are containerd's (systemd's), whatever a cluster's
    # KubeletConfiguration says: a mismatch leaves every pod failing to start
    NodeFile("/etc/default/kubelet", "KUBELET_EXTRA_ARGS=--cgroup-driver=systemd\n"),
    # kubeadm's sandbox image (loaded by `cluster images`: no registry) and systemd's cgroups
    NodeFile("/etc/containerd/config.toml", CONTAINERD_CONFIG),
    NodeFile("/etc/modules-load.d/k8sdds.conf", "".join(f"{m}\n" for m, _ in MODULES)),
    NodeFile("/etc/sysctl.d/90-k8sdds.conf", "".join(f"{k} = {v}\n" for k, v in SYSCTLS)),
)
