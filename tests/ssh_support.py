"""Real OpenSSH servers for the bare-host commands' tests: one `sshd` (Debian's
openssh-server) in each of a few network namespaces, with test keys and a test known_hosts.
Host i is `10.<net>.0.<10+i>` on a bridge with this machine (`10.<net>.0.1`): the hosts
reach each other, as a LAN of bare hosts would."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

SSHD = "/usr/sbin/sshd"


def missing() -> str | None:
    from .emulated_support import missing as no_namespaces

    reason = no_namespaces()
    if reason:
        return reason
    for tool in (SSHD, shutil.which("ssh-keygen")):
        if not tool or not Path(tool).exists():
            return "needs openssh-server and ssh-keygen (make test installs them)"
    return None


def check_rows(out: str) -> dict[tuple[str, str], str]:
    """`cluster check`'s table, printed: each row's line by (host, check)."""
    return {(line.split("│")[1].strip(), line.split("│")[2].strip()): line
            for line in out.splitlines() if line.count("│") >= 6}


def _run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


@dataclass
class Hosts:
    """`count` namespaces `<prefix>-h<i>`; sshd runs in those listed in `serving`."""

    directory: Path
    prefix: str
    count: int = 3
    serving: tuple[int, ...] = (1, 2)
    standins: Path | None = None  # a directory first on the sessions' PATH
    local: bool = False  # /usr/local/sbin and /usr/local/bin on it (a node's own: overlaid)
    net: int = 251  # hosts are 10.<net>.<i>.2: two sets of hosts at once need two nets
    procs: list[subprocess.Popen] = field(default_factory=list)

    def address(self, i: int) -> str:
        return f"10.{self.net}.0.{10 + i}"

    def ns(self, i: int) -> str:
        return f"{self.prefix}-h{i}"

    def up(self) -> Hosts:
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "id_ed25519"))
        (d / "authorized_keys").write_text((d / "id_ed25519.pub").read_text())
        (d / "home").mkdir(exist_ok=True)
        bridge = f"{self.prefix}br"
        _run("ip", "link", "add", bridge, "type", "bridge")
        _run("ip", "addr", "add", f"10.{self.net}.0.1/24", "dev", bridge)
        _run("ip", "link", "set", bridge, "up")
        path = ((f"{self.standins}:" if self.standins else "")
                + ("/usr/local/sbin:/usr/local/bin:" if self.local else "")
                + "/usr/sbin:/usr/bin:/sbin:/bin")
        for i in range(1, self.count + 1):
            ns, link = self.ns(i), f"{self.prefix}v{i}"
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _run("ip", "link", "set", link, "master", bridge, "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", ns, "route", "add", "default", "via", f"10.{self.net}.0.1")
            key = d / f"host{i}_ed25519"
            _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
            if i in self.serving:
                conf = d / f"sshd{i}.conf"
                conf.write_text(
                    f"ListenAddress {self.address(i)}\nPort 22\nHostKey {key}\n"
                    f"PidFile {d}/sshd{i}.pid\nAuthorizedKeysFile {d}/authorized_keys\n"
                    "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                    "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                    "Subsystem sftp internal-sftp\n"
                    # a HOME of the test's: the sessions' shell reads no rc file of this
                    # machine's root (which may start slow tools)
                    f"SetEnv HOME={d}/home PATH={path}\n")
                self.procs.append(subprocess.Popen(
                    [*self.enter(i), SSHD, "-D", "-e", "-f", str(conf)],
                    stdout=subprocess.DEVNULL, stderr=open(d / f"sshd{i}.log", "wb")))
        for i in self.serving:
            self._wait_listening(i)
        return self

    def enter(self, i: int) -> list[str]:
        """The argv prefix that runs a command in host i (its sshd, and what a subclass
        starts beside it)."""
        return ["ip", "netns", "exec", self.ns(i)]

    def _wait_listening(self, i: int, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = _run("ip", "netns", "exec", self.ns(i), "ss", "-Htln", "sport", "= :22")
            if out.strip():
                return
            time.sleep(0.05)  # sshd opening its socket: nothing to wait on but the socket
        raise RuntimeError(f"sshd in {self.ns(i)} did not listen: see {self.directory}")

    def known_hosts(self, hosts: tuple[int, ...]) -> Path:
        path = self.directory / ("known_hosts-" + "-".join(map(str, hosts)))
        path.write_text("".join(
            f"{self.address(i)} " + " ".join((self.directory / f"host{i}_ed25519.pub")
                                             .read_text().split()[:2]) + "\n" for i in hosts))
        return path

    def fingerprint(self, i: int) -> str:
        return _run("ssh-keygen", "-lf", str(self.directory / f"host{i}_ed25519.pub")).split()[1]

    def inventory(self, hosts: tuple[int, ...], known: Path, arch: str | None = None,
                  engine_bin: str | None = None) -> Path:
        """The first host the control plane, amd64; the others workers, arm (a hybrid
        cluster); every host `arch` when given; `engine_bin` on every host when given."""
        path = self.directory / ("inventory-" + "-".join(map(str, hosts))
                                 + (f"-{arch}" if arch else "")
                                 + ("-engines" if engine_bin else "") + ".yaml")
        defaults = {"user": "root", "key": str(self.directory / "id_ed25519")}
        if engine_bin:
            defaults["engine_bin"] = engine_bin
        path.write_text(yaml.safe_dump({
            "known_hosts": str(known),
            "defaults": defaults,
            "hosts": [{"name": f"h{i}", "address": self.address(i),
                       "role": "control-plane" if n == 0 else "worker",
                       "arch": arch or ("amd64" if n == 0 else "arm")}
                      for n, i in enumerate(hosts)]}))
        return path

    def sysctl(self, i: int, key: str) -> str:
        return " ".join(_run("ip", "netns", "exec", self.ns(i), "sysctl", "-n", key).split())

    def down(self) -> None:
        for p in self.procs:
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        for i in range(1, self.count + 1):
            subprocess.run(["ip", "netns", "del", self.ns(i)], capture_output=True)
            subprocess.run(["ip", "link", "del", f"{self.prefix}v{i}"], capture_output=True)
        subprocess.run(["ip", "link", "del", f"{self.prefix}br"], capture_output=True)
