"""One ARM machine: a copy-on-write layer over the cached disk, a seed disk with its own name,
address and keys, a tap device in a bridge of this machine, and qemu emulating the board.

Everything it makes is in its folder (the layer, the seed, the console's log, qemu's pid)
and the tap device; `down` removes both. The disk itself stays untouched in the cache."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from k8sdds.cluster.remote import ssh_answers
from k8sdds.errors import UserError
from k8sdds.vm.image import BOARDS, SEED_LABEL, Disk, run

BOOT_TIMEOUT_S = 600.0  # TCG boots a Debian arm64 in about 1-3 minutes on 2 busy cores
STATE = Path("/run/k8sdds/vm")  # the machines `k8sdds vm up` started


PI_CORES = 4  # a Raspberry Pi 2's, 3's, 4's and 5's


def default_cpus() -> int:
    """A Pi's cores, or this machine's where it has fewer (more vCPUs than host threads
    only wait for each other)."""
    return max(1, min(PI_CORES, os.cpu_count() or 1))


@dataclass(frozen=True)
class Spec:
    """What makes one machine of the disk."""

    name: str  # its host name
    address: str  # its address with prefix length on the bridge's network: 10.252.0.14/24
    gateway: str  # the default route and resolver (the bridge's own address)
    bridge: str  # the bridge of this machine its tap joins
    authorized_keys: str  # root's (text of an authorized_keys file)
    arch: str = "arm64"
    memory_mb: int = 1024  # a Pi 3's
    # a Pi's four cores, each a thread of QEMU's (multi-threaded TCG), at most this
    # machine's own
    cpus: int = field(default_factory=lambda: default_cpus())

    def check(self) -> None:
        """A clear error for a value qemu or the guest would trip over."""
        if not self.name.replace("-", "").isalnum() or len(self.name) > 40:
            raise UserError(f"machine name {self.name!r}: letters, digits and '-', at most 40")
        try:
            iface = ipaddress.ip_interface(self.address)
            gw = ipaddress.ip_address(self.gateway)
        except ValueError as exc:
            raise UserError(f"machine {self.name}: {exc}") from None
        if iface.version != 4 or iface.network.prefixlen == 32 or gw not in iface.network:
            raise UserError(f"machine {self.name}: address {self.address} must be IPv4 with "
                            f"its prefix length (10.0.0.5/24), the gateway {self.gateway} "
                            "in its network")
        if not 1 <= self.cpus <= 8:
            raise UserError(f"machine {self.name}: {self.cpus} CPUs; 1 to 8 (QEMU's virt "
                            "board with a GICv2)")
        if self.arch not in BOARDS:
            raise UserError(f"machine {self.name}: arch {self.arch!r}: one of "
                            f"{', '.join(BOARDS)}")
        if not self.authorized_keys.strip():
            raise UserError(f"machine {self.name}: no authorized key: root could not log in")

    @property
    def ip(self) -> str:
        return str(ipaddress.ip_interface(self.address).ip)


def tap_name(name: str) -> str:
    """The tap device's name: kvm and a hash of the machine's (at most 15 bytes).
    Pure."""
    return "kvm" + hashlib.sha256(name.encode()).hexdigest()[:10]


def mac_of(name: str) -> str:
    """A stable, locally administered MAC address for the machine. Pure."""
    digest = hashlib.sha256(name.encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])


def seed_files(spec: Spec, host_key: str, host_key_pub: str) -> dict[str, str]:
    """The seed disk's files (read by k8sdds-seed in the guest). Pure."""
    return {"hostname": spec.name + "\n", "address": spec.address + "\n",
            "gateway": spec.gateway + "\n", "authorized_keys": spec.authorized_keys,
            "ssh_host_ed25519_key": host_key, "ssh_host_ed25519_key.pub": host_key_pub}


def qemu_argv(disk: Disk, spec: Spec, layer: Path, seed: Path, console: Path) -> list[str]:
    """qemu's command: the board, its kernel and initramfs from the disk, the root file
    system (the layer) and the seed as virtio disks, a virtio NIC on the tap. Pure."""
    board = disk.board
    return [board.qemu, "-M", "virt", "-cpu", board.cpu, "-smp", str(spec.cpus),
            "-m", str(spec.memory_mb), "-accel", "tcg,thread=multi", "-nodefaults",
            "-no-user-config",
            "-display", "none", "-serial", f"file:{console}", "-monitor", "none",
            "-kernel", str(disk.kernel), "-initrd", str(disk.initrd),
            "-append", f"root=LABEL=k8sdds-root rw console={board.console} net.ifnames=0 "
                       "panic=5",
            "-drive", f"if=none,id=root,file={layer},format=qcow2",
            "-device", "virtio-blk-pci,drive=root",
            "-drive", f"if=none,id=seed,file={seed},format=raw,readonly=on",
            "-device", "virtio-blk-pci,drive=seed",
            "-netdev", f"tap,id=net,ifname={tap_name(spec.name)},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=net,mac={mac_of(spec.name)},romfile=",
            "-no-reboot"]


@dataclass
class Machine:
    """One machine, its state in `folder`."""

    folder: Path
    spec: Spec

    @property
    def known_host(self) -> str:
        """Its host key, as a known_hosts line."""
        key = " ".join((self.folder / "ssh_host_ed25519_key.pub").read_text().split()[:2])
        return f"{self.spec.ip} {key}\n"

    @property
    def console(self) -> Path:
        return self.folder / "console.log"

    def pid(self) -> int | None:
        """qemu's process while it runs (an ended child of ours is reaped: not running)."""
        try:
            pid = int((self.folder / "qemu.pid").read_text())
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return None
            except ChildProcessError:  # started by another k8sdds process
                pass
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def up(self, disk: Disk, say: Callable[[str], None] = lambda _: None,
           timeout: float = BOOT_TIMEOUT_S) -> float:
        """Boot it and wait until its sshd answers; the seconds that took."""
        self.spec.check()
        if self.pid():
            raise UserError(f"machine {self.spec.name} is already up ({self.folder})")
        if not Path(f"/sys/class/net/{self.spec.bridge}/bridge").exists():
            raise UserError(f"machine {self.spec.name}: {self.spec.bridge} is not a bridge of "
                            "this machine")
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "spec.json").write_text(json.dumps(asdict(self.spec), indent=1))
        layer, seed = self.folder / "layer.qcow2", self.folder / "seed.img"
        run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(disk.root), "-F", "raw",
             str(layer)], "the machine's copy-on-write layer")
        key = self.folder / "ssh_host_ed25519_key"
        key.unlink(missing_ok=True)
        key.with_suffix(".pub").unlink(missing_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.spec.name,
             "-f", str(key)], "its host key")
        with tempfile.TemporaryDirectory() as tmp:
            for name, text in seed_files(self.spec, key.read_text(),
                                         (self.folder / "ssh_host_ed25519_key.pub")
                                         .read_text()).items():
                (Path(tmp) / name).write_text(text)
                (Path(tmp) / name).chmod(0o600)
            seed.unlink(missing_ok=True)
            run(["mkfs.ext4", "-q", "-L", SEED_LABEL, "-d", tmp, str(seed), "4M"],
                "its seed disk")
        tap = tap_name(self.spec.name)
        run(["ip", "tuntap", "add", "dev", tap, "mode", "tap"], f"tap device {tap}")
        run(["ip", "link", "set", tap, "master", self.spec.bridge, "up"],
            f"tap device {tap} into {self.spec.bridge}")
        started = time.monotonic()
        proc = subprocess.Popen(qemu_argv(disk, self.spec, layer, seed, self.console),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=open(self.folder / "qemu.log", "wb"),
                                start_new_session=True)
        (self.folder / "qemu.pid").write_text(str(proc.pid))
        say(f"{self.spec.name}: booting ({self.spec.cpus} x {disk.board.cpu}, "
            f"{self.spec.memory_mb} MiB, "
            f"console: {self.console})")
        try:
            return self._wait_ssh(proc, started, timeout)
        except BaseException:  # interrupted too: nothing of it outlives the wait
            self.down()
            raise

    def _wait_ssh(self, proc: subprocess.Popen, started: float, timeout: float) -> float:
        while not ssh_answers(self.spec.ip):
            if proc.poll() is not None:
                raise UserError(f"machine {self.spec.name}: qemu ended (exit "
                                f"{proc.returncode}): {_tail(self.folder / 'qemu.log')}")
            if time.monotonic() - started > timeout:
                raise UserError(f"machine {self.spec.name}: no sshd at {self.spec.ip}:22 "
                                f"within {timeout:g} s; its console said: "
                                f"{_tail(self.console)}")
            time.sleep(1)  # the guest booting: nothing here to be told of
        return time.monotonic() - started

    def rss_mib(self) -> float:
        """qemu's resident memory (the guest's RAM it touched, and qemu's own)."""
        pid = self.pid()
        if pid is None:
            return 0.0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def down(self) -> None:
        """Stop qemu, remove the tap device and what the machine's folder holds but its
        console's and qemu's logs (what it said, for whoever looks after)."""
        pid = self.pid()
        if pid:
            os.kill(pid, signal.SIGTERM)  # qemu ends the emulation at once
            deadline = time.monotonic() + 10
            while self.pid() and time.monotonic() < deadline:
                time.sleep(0.1)
            if self.pid():
                os.kill(pid, signal.SIGKILL)
        subprocess.run(["ip", "link", "del", tap_name(self.spec.name)], capture_output=True)
        for item in self.folder.glob("*"):
            if item.name not in ("console.log", "qemu.log"):
                item.unlink()


def existing(name: str, state: Path = STATE) -> Machine | None:
    """A machine `k8sdds vm up` started, by name."""
    spec = state / name / "spec.json"
    if not spec.exists():
        return None
    return Machine(state / name, Spec(**json.loads(spec.read_text())))


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(nothing)"
    return " | ".join(text[-lines:]) or "(nothing)"
