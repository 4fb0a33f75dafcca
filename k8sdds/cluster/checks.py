"""`k8sdds cluster check`: the preflight of a kubeadm node, each check a command and a pure
judgement of its output, with the fix for a failure."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from k8sdds.cluster.remote import Remote, Result

MAX_SKEW_S = 2.0  # etcd and TLS certificates want clocks within a few seconds


@dataclass(frozen=True)
class Check:
    name: str
    argv: tuple[str, ...]
    judge: Callable[[Result], tuple[bool, str]]  # (passed, what was found)
    fix: str


@dataclass(frozen=True)
class Finding:
    host: str
    check: str
    passed: bool
    found: str
    fix: str
    advisory: bool = False  # a failure is said, and does not fail the check (exit 0)


def _swap(r: Result) -> tuple[bool, str]:
    lines = [ln for ln in r.out.splitlines()[1:] if ln.strip()]
    return (not lines, "off" if not lines else f"on: {', '.join(ln.split()[0] for ln in lines)}")


def _cgroups(r: Result) -> tuple[bool, str]:
    """/proc/cgroups: the memory and cpuset controllers must be enabled (column 4)."""
    enabled = {f[0]: f[3] == "1" for f in (ln.split() for ln in r.out.splitlines())
               if len(f) >= 4 and not f[0].startswith("#")}
    missing = [c for c in ("memory", "cpuset") if not enabled.get(c)]
    return (not missing, "memory and cpuset enabled" if not missing
            else f"not enabled: {', '.join(missing)}")


def _is_one(what: str) -> Callable[[Result], tuple[bool, str]]:
    def judge(r: Result) -> tuple[bool, str]:
        if r.code != 0:
            return False, f"{what} absent ({r.err.strip() or 'exit ' + str(r.code)})"
        return r.out.strip() == "1", f"{what} = {r.out.strip()}"
    return judge


def _version(what: str) -> Callable[[Result], tuple[bool, str]]:
    def judge(r: Result) -> tuple[bool, str]:
        text = (r.out.strip() or r.err.strip()).splitlines()
        if r.code != 0 or not text:
            return False, f"{what} not found"
        return True, text[0][:80]
    return judge


def _systemd_cgroup(r: Result) -> tuple[bool, str]:
    """containerd's runc with systemd's cgroups, as kubeadm's kubelet uses them. Pure."""
    if r.code != 0:
        return False, "no /etc/containerd/config.toml"
    on = any(line.split("#")[0].replace(" ", "") == "SystemdCgroup=true"
             for line in r.out.splitlines())
    return on, "SystemdCgroup = true" if on else "SystemdCgroup not set"


def _plugins(r: Result) -> tuple[bool, str]:
    """The CNI plugins the CNIs' configurations call, in /opt/cni/bin. Pure."""
    from k8sdds.cluster.node_files import PLUGINS

    have = set(r.out.split()) if r.code == 0 else set()
    lacking = [p for p in PLUGINS if p not in have]
    return not lacking, (f"{', '.join(PLUGINS)} present" if not lacking
                         else f"missing: {', '.join(lacking)}")


def _enabled(r: Result) -> tuple[bool, str]:
    found = r.out.strip() or r.err.strip() or f"exit {r.code}"
    return r.code == 0, found.splitlines()[0][:60]


# the node parts' fix: k8sdds puts them on (Kubernetes publishes no 32-bit ARM binaries)
INSTALL = "k8sdds cluster install -i INVENTORY"

CHECKS = (
    Check("swap off", ("cat", "/proc/swaps"), _swap,
          "swapoff -a, and remove swap from /etc/fstab (Raspberry Pi OS: "
          "dphys-swapfile swapoff && systemctl disable dphys-swapfile)"),
    Check("cgroup memory and cpuset", ("cat", "/proc/cgroups"), _cgroups,
          "Raspberry Pi: append `cgroup_enable=cpuset cgroup_enable=memory cgroup_memory=1` to "
          "the single line of /boot/firmware/cmdline.txt (/boot/cmdline.txt on older OS), "
          "then reboot"),
    Check("br_netfilter", ("cat", "/proc/sys/net/bridge/bridge-nf-call-iptables"),
          _is_one("net.bridge.bridge-nf-call-iptables"),
          "modprobe br_netfilter; echo br_netfilter > /etc/modules-load.d/k8s.conf; "
          "sysctl -w net.bridge.bridge-nf-call-iptables=1"),
    Check("ip_forward", ("cat", "/proc/sys/net/ipv4/ip_forward"),
          _is_one("net.ipv4.ip_forward"),
          "sysctl -w net.ipv4.ip_forward=1, and set it in /etc/sysctl.d/k8s.conf"),
    Check("container runtime", ("containerd", "--version"), _version("containerd"), INSTALL),
    Check("containerd cgroups", ("cat", "/etc/containerd/config.toml"), _systemd_cgroup,
          INSTALL + " (or set SystemdCgroup = true in /etc/containerd/config.toml)"),
    Check("CNI plugins", ("ls", "/opt/cni/bin"), _plugins, INSTALL),
    Check("kubeadm", ("kubeadm", "version", "-o", "short"), _version("kubeadm"), INSTALL),
    Check("kubelet", ("kubelet", "--version"), _version("kubelet"), INSTALL),
    Check("kubelet service", ("systemctl", "is-enabled", "kubelet.service"), _enabled,
          INSTALL),
)
CLOCK = ("date", "+%s.%N")
# `uname -m` -> the inventory's name of that architecture
MACHINES = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "armv6l": "arm"}


def architecture(r: Result, said: str) -> tuple[bool, str]:
    """The host's machine (`uname -m`) against the inventory's arch: a wrong one gets images
    and engines of another architecture. Pure."""
    machine = r.out.strip() if r.code == 0 else ""
    found = MACHINES.get(machine)
    if found is None:
        return False, f"{machine or 'uname -m failed'}: not an architecture k8sdds builds for"
    return (True, machine) if found == said else (
        False, f"{machine} ({found}); the inventory says {said}")


def skew(r: Result, sent: float, received: float) -> tuple[bool, str]:
    """The host clock against this machine's, allowing for the round trip."""
    try:
        remote = float(r.out.strip())
    except ValueError:
        return False, f"unreadable date: {r.out.strip()[:40]!r}"
    offset = remote - (sent + received) / 2
    return abs(offset) <= MAX_SKEW_S, f"{offset:+.2f} s"


def check_host(remote: Remote) -> list[Finding]:
    """Every check on one host (connected, or dry-run: the commands only logged)."""
    name = remote.host.name
    out = [Finding(name, "reachable", True, "ssh ok" if not remote.dry_run else "dry run", "")]
    result = remote.run(("uname", "-m"))
    passed, found = (architecture(result, remote.host.arch) if not remote.dry_run
                     else (True, "dry run"))
    out.append(Finding(name, "architecture", passed, found,
                       "" if passed else "give the host its arch in the inventory"))
    for check in CHECKS:
        result = remote.run(check.argv)
        passed, found = check.judge(result) if not remote.dry_run else (True, "dry run")
        out.append(Finding(name, check.name, passed, found, "" if passed else check.fix))
    sent = time.time()
    result = remote.run(CLOCK)
    passed, found = skew(result, sent, time.time()) if not remote.dry_run else (True, "dry run")
    out.append(Finding(name, "time skew", passed, found,
                       "" if passed else "enable time sync: timedatectl set-ntp true "
                       "(systemd-timesyncd or chrony)"))
    return out


def engines_check(remote: Remote, own: tuple[str, ...]) -> Finding:
    """What a `--backend ssh` run may need that the host lacks (advisory: kubeadm needs none
    of it), each with how to get it."""
    from k8sdds.cluster.engines import missing

    lacking = [] if remote.dry_run else missing(remote, own)
    return Finding(remote.host.name, "engines (ssh runs)", not lacking,
                   "all present" if not lacking else
                   "missing: " + ", ".join(m.split(":")[0] for m in lacking),
                   "; ".join(lacking), advisory=True)


def image_check(remote: Remote, control_plane: bool, cni_images: list[str], address: str,
                fix: str) -> Finding:
    """The images kubeadm (and the CNI) will run, present in the host's containerd: an
    air-gapped host cannot pull them."""
    from k8sdds.cluster.images import survey
    from k8sdds.cluster.remote import HostError

    name = remote.host.name
    if remote.dry_run:
        survey(remote, control_plane, cni_images, address)
        return Finding(name, "images", True, "dry run", "")
    try:
        found = survey(remote, control_plane, cni_images, address)
    except HostError as exc:
        return Finding(name, "images", False, str(exc), fix)
    if found.missing:
        return Finding(name, "images", False, f"missing: {', '.join(found.missing)}", fix)
    return Finding(name, "images", True, f"all {len(found.needed)} present (kubeadm "
                   f"{found.version})", "")
