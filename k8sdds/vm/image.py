"""The ARM machine's disk, built once and cached: Debian's arm64 or armhf system
(debootstrap, its maintainer scripts run under qemu-user in a private binfmt_misc) as a fresh
Raspberry Pi OS is, with sshd and no Kubernetes node part (no kubelet, kubeadm, containerd,
runc or CNI plugin: `k8sdds cluster install` puts them on, as on a Pi), packed as an ext4
image beside the kernel and initramfs Debian's packages made.

The maintainer scripts run in a user namespace of this process's own (uids mapped one to
one) with a binfmt_misc instance of its own: the board's qemu-user emulator is registered
there, never in this machine's, and nothing is left mounted when it ends."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from k8sdds import caches
from k8sdds.errors import UserError
from k8sdds.images.debian_engines import SUITE  # the Debian release k8sdds runs on

MIRROR = "http://deb.debian.org/debian"
ROOT_LABEL = "k8sdds-root"
SEED_LABEL = "k8sdds-seed"
ROOT_SIZE = "6G"  # sparse: what the images and pods of a node need, written as they come


# binfmt_misc's match on an ELF header (QEMU's scripts/qemu-binfmt-conf.sh): its class
# (1: 32-bit, 2: 64-bit), little-endian, version 1, an executable (type 2 or 3) of `machine`
ELF_MASK = r"\xff" * 7 + r"\x00" + r"\xff" * 8 + r"\xfe\xff\xff\xff"


def elf_magic(bits: int, machine: int) -> str:
    """binfmt_misc's magic for little-endian Linux executables of one architecture. Pure."""
    header = [0x7F, 0x45, 0x4C, 0x46, bits // 32, 1, 1, *[0] * 9, 2, 0, machine, 0]
    return "".join(f"\\x{b:02x}" for b in header)


@dataclass(frozen=True)
class EmulatedBoard:
    """One kind of ARM machine: what Debian calls it and how QEMU emulates it."""

    arch: str  # Debian's architecture
    qemu: str  # the full-system emulator
    cpu: str  # the emulated core (a Pi's)
    user: str  # the user-mode emulator that runs its maintainer scripts here
    bits: int  # 64 or 32: its executables' ELF class
    machine: int  # its executables' ELF e_machine (183 AArch64, 40 ARM)
    kernel: str  # Debian's kernel package
    console: str = "ttyAMA0"  # the serial console's device name in the guest (QEMU virt's)

    @property
    def elf(self) -> tuple[str, str]:
        """binfmt_misc's magic and mask for its executables."""
        return elf_magic(self.bits, self.machine), ELF_MASK


BOARDS = {
    "arm64": EmulatedBoard(arch="arm64", qemu="qemu-system-aarch64", cpu="cortex-a53",
                   user="/usr/bin/qemu-aarch64-static", bits=64, machine=183,
                   kernel="linux-image-arm64"),
    # a Pi 2's core, 32-bit (Debian's armhf needs ARMv7); Debian's LPAE kernel, as the A7
    # has the extension (the kernel flavour meant for virtual machines)
    "armhf": EmulatedBoard(arch="armhf", qemu="qemu-system-arm", cpu="cortex-a7",
                   user="/usr/bin/qemu-arm-static", bits=32, machine=40,
                   kernel="linux-image-armmp-lpae"),
}

# Debian's packages: systemd and sshd, what the kubelet, kubeadm's preflight and the CNIs call
# on a node; ddsperf for a bare-host run. The container runtime and the CNI plugins are not
# among them: a fresh Raspberry Pi OS has none, and `cluster install` brings them
PACKAGES = ("systemd", "systemd-sysv", "udev", "dbus", "kmod", "openssh-server", "iproute2",
            "iputils-ping", "procps", "iptables", "conntrack", "ethtool", "socat", "ebtables",
            "ca-certificates", "mount", "cyclonedds-tools")

SEED_SCRIPT = f"""#!/bin/sh
# This machine's own name, address and keys, from its seed disk (k8sdds vm up).
set -eu
seed=/run/k8sdds-seed
mkdir -p "$seed"
mount -o ro LABEL={SEED_LABEL} "$seed"
read -r name < "$seed/hostname"
read -r address < "$seed/address"
read -r gateway < "$seed/gateway"
hostname "$name"
cp "$seed/hostname" /etc/hostname
printf '127.0.0.1 localhost\\n%s %s\\n' "${{address%/*}}" "$name" > /etc/hosts
printf 'nameserver %s\\n' "$gateway" > /etc/resolv.conf
ip link set lo up
ip addr add "$address" dev eth0
ip link set eth0 up
ip route add default via "$gateway"
install -d -m 700 /root/.ssh
install -m 600 "$seed/authorized_keys" /root/.ssh/authorized_keys
install -m 600 "$seed/ssh_host_ed25519_key" /etc/ssh/ssh_host_ed25519_key
install -m 644 "$seed/ssh_host_ed25519_key.pub" /etc/ssh/ssh_host_ed25519_key.pub
umount "$seed"
"""

SEED_UNIT = """[Unit]
Description=k8sdds: this machine's name, address and keys from its seed disk
DefaultDependencies=no
Requires=dev-disk-by\\x2dlabel-k8sdds\\x2dseed.device sys-subsystem-net-devices-eth0.device
After=dev-disk-by\\x2dlabel-k8sdds\\x2dseed.device sys-subsystem-net-devices-eth0.device
After=local-fs.target
Before=network.target network-online.target ssh.service containerd.service kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/k8sdds-seed

[Install]
WantedBy=multi-user.target network-online.target
"""

# the initramfs holds only what finds the root file system on the board's virtio disk (the
# default, every storage driver, takes many minutes under qemu-user); written before the
# kernel's package is configured
INITRAMFS: Mapping[str, str] = {
    "etc/initramfs-tools/conf.d/k8sdds": "MODULES=list\nCOMPRESS=gzip\n",
    "etc/initramfs-tools/modules": "virtio_pci\nvirtio_blk\nvirtio_net\next4\n",
}

# path in the machine -> (text, mode)
FILES: Mapping[str, tuple[str, int]] = {
    "etc/fstab": (f"LABEL={ROOT_LABEL} / ext4 rw,errors=remount-ro 0 1\n", 0o644),
    "usr/local/sbin/k8sdds-seed": (SEED_SCRIPT, 0o755),
    "etc/systemd/system/k8sdds-seed.service": (SEED_UNIT, 0o644),
    "etc/ssh/sshd_config.d/k8sdds.conf": ("HostKey /etc/ssh/ssh_host_ed25519_key\n"
                                          "PermitRootLogin prohibit-password\n"
                                          "PasswordAuthentication no\nUseDNS no\n", 0o644),
}
# run in the machine's root once its packages are configured
SETTLE = ("systemctl enable k8sdds-seed.service"
          " && rm -f /etc/ssh/ssh_host_*"
          " && : > /etc/machine-id && rm -f /var/lib/dbus/machine-id"
          " && apt-get clean && rm -rf /var/lib/apt/lists/*")


@dataclass(frozen=True)
class Disk:
    """A built machine disk: the files qemu boots."""

    folder: Path
    board: EmulatedBoard

    @property
    def kernel(self) -> Path:
        return self.folder / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.folder / "initrd.img"

    @property
    def root(self) -> Path:
        return self.folder / "root.img"

    def built(self) -> dict:
        return json.loads((self.folder / "built.json").read_text())


def missing(board: EmulatedBoard) -> str | None:
    """What this machine lacks to build or boot `board`'s machine, or None."""
    for tool in ("debootstrap", "mkfs.ext4", "unshare", "qemu-img", board.qemu, board.user):
        if not shutil.which(tool):
            return (f"needs {tool} (apt-get install debootstrap e2fsprogs qemu-utils "
                    f"qemu-system-arm qemu-user-static)")
    return None


def recipe(board: EmulatedBoard) -> str:
    """What the disk is made of, as text: its hash names the cached disk. Pure."""
    return json.dumps({"suite": SUITE, "board": board.arch, "kernel": board.kernel,
                       "packages": PACKAGES, "files": FILES, "initramfs": INITRAMFS,
                       "settle": SETTLE}, sort_keys=True)


def disk(board: EmulatedBoard, say: Callable[[str], None], mirror: str = MIRROR) -> Disk:
    """The machine disk for `board`, built the first time (about 4 minutes on 2 cores),
    then taken from the cache."""
    reason = missing(board)
    if reason:
        raise UserError(f"the {board.arch} machine: {reason}")
    made_of = recipe(board)
    key = hashlib.sha256(made_of.encode()).hexdigest()[:12]
    folder = caches.root() / "vm" / f"debian-{SUITE}-{board.arch}-{key}"
    done = Disk(folder, board)
    if (folder / "built.json").exists():
        return done
    folder.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".building-") as work:
        root = Path(work) / "root"
        say(f"the {board.arch} machine's disk: Debian {SUITE} from {mirror} (once; cached "
            f"in {folder})")
        run(["debootstrap", "--foreign", f"--arch={board.arch}", "--variant=minbase",
             f"--include={','.join((*PACKAGES, board.kernel))}", SUITE, str(root), mirror],
            "debootstrap's first stage")
        for path, text in INITRAMFS.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        say(f"its packages configured under {Path(board.user).name} (debootstrap's second "
            "stage)")
        in_root(board, root, "export container=lxc; /debootstrap/debootstrap --second-stage",
                "debootstrap's second stage")
        for path, (text, mode) in FILES.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            target.chmod(mode)
        in_root(board, root, SETTLE, "settling the machine")
        staged = Path(work) / "disk"
        staged.mkdir()
        boot = root / "boot"
        shutil.copyfile(_one(boot, "vmlinuz-*"), staged / "vmlinuz")
        shutil.copyfile(_one(boot, "initrd.img-*"), staged / "initrd.img")
        (staged / "packages").write_text(_packages(root))
        say("packed as an ext4 image")
        run(["mkfs.ext4", "-q", "-L", ROOT_LABEL, "-d", str(root), str(staged / "root.img"),
             ROOT_SIZE], "mkfs.ext4")
        (staged / "built.json").write_text(json.dumps(
            {"seconds": round(time.monotonic() - started), "recipe": json.loads(made_of)},
            indent=1) + "\n")
        os.replace(staged, folder)
    for old in folder.parent.glob(f"debian-{SUITE}-{board.arch}-*"):
        if old != folder:  # an earlier recipe's disk: never booted again
            shutil.rmtree(old, ignore_errors=True)
    say(f"the {board.arch} machine's disk: built in {time.monotonic() - started:.0f} s")
    return done


def in_root(board: EmulatedBoard, root: Path, script: str, what: str) -> None:
    """Run `script` (sh) chrooted in the foreign `root`, its binaries run by qemu-user through
    a binfmt_misc of a user namespace of our own (uids 0-65535 mapped to themselves, so
    files keep their owners)."""
    magic, mask = board.elf
    setup = (
        "set -e; mount -t binfmt_misc none /proc/sys/fs/binfmt_misc; "
        f"printf '%s' ':k8sdds-{board.arch}:M::{magic}:{mask}:{board.user}:FP' "
        "> /proc/sys/fs/binfmt_misc/register; "
        f'mount --rbind /dev "{root}/dev"; mount --rbind /sys "{root}/sys"; '
        f'exec chroot "{root}" /bin/sh -c "$1"')
    # the child waits until its uid map is written (by us: only a process outside the
    # namespace may write it), then sets up its binfmt_misc and runs the script
    wrapper = f'until grep -q . /proc/self/uid_map; do sleep 0.05; done; {setup}'
    # --kill-child: unshare's end (a stop of the build kills it) ends the namespace's first
    # process, and with it every process of the namespace, whatever group a package's
    # script put itself in
    proc = subprocess.Popen(["unshare", "--user", "--mount", "--pid", "--fork", "--mount-proc",
                             "--kill-child", "--", "sh", "-c", wrapper, "sh", script],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        child = _child_of(proc.pid)
        for name in ("uid_map", "gid_map"):
            Path(f"/proc/{child}/{name}").write_text("0 0 65536\n")
        out, _ = proc.communicate(timeout=3600)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if proc.returncode != 0:
        raise UserError(f"the machine's disk: {what} failed (exit {proc.returncode}): "
                        + " | ".join(out.strip().splitlines()[-5:]))


def _child_of(pid: int, timeout: float = 10) -> int:
    """unshare's forked child (the namespaces' first process)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = []
        if children:
            return int(children[0])
        time.sleep(0.02)  # unshare forking: nothing to wait on but /proc
    raise UserError("the machine's disk: unshare did not start its child")


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise UserError(f"the machine's disk: {len(found)} files {pattern} in /boot, not one")
    return found[0]


def _packages(root: Path) -> str:
    """The installed packages and versions, from dpkg's status file (read, not run)."""
    rows, name, version = [], "", ""
    for line in (root / "var/lib/dpkg/status").read_text().splitlines() + [""]:
        if line.startswith("Package: "):
            name = line.split(": ", 1)[1]
        elif line.startswith("Version: "):
            version = line.split(": ", 1)[1]
        elif not line and name:
            rows.append(f"{name} {version}")
            name = version = ""
    return "\n".join(sorted(rows)) + "\n"


def run(argv: list[str], what: str) -> None:
    """A command of this machine's for the ARM machine; a UserError with what it said last
    when it fails."""
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise UserError(f"the ARM machine: {what} failed (exit {proc.returncode}): "
                        + " | ".join(tail))
