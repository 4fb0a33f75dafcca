"""`k8sdds cluster install`: what a bare Debian host (Raspberry Pi OS, Debian 12) lacks to be
a kubeadm node, put on over SSH from this machine alone: the host needs no package
repository and no network but this machine's SSH.

- kubelet and kubeadm (and kubectl on the control plane): k8sdds' own builds of the pinned
  version for the host's architecture, in /usr/local/bin;
- containerd, runc and the CNI plugins: Debian 12's packages of that architecture with what
  they depend on (`images.debian_node`), installed by the host's dpkg when it lacks them; the
  plugins linked into /opt/cni/bin, where containerd and the CNIs look;
- the kubelet's systemd unit and kubeadm's drop-in (those of kubeadm's own packages), the
  kubelet's cgroup driver, containerd's configuration (systemd's cgroups, kubeadm's sandbox
  image), the kernel modules and sysctls kubeadm's preflight checks.

Every file is checked by SHA-256 on the host after the copy; what is already in place is
left alone (a second install changes nothing). What the host had before is recorded in
/var/lib/k8sdds/node on the host (a file replaced is kept there), so that `k8sdds cluster
reset --purge` puts the host back as it was."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from k8sdds.cluster.node_files import (
    BIN,
    CNI_BIN,
    CONTROL_PLANE_PARTS,
    FILES,
    KEPT,
    MODULES,
    PARTS,
    PLUGINS,
    RECORD,
    STATE,
    SYSCTLS,
)
from k8sdds.cluster.remote import (
    HostError,
    Remote,
    Result,
    checked,
    last_line,
    remote_copy,
    remote_file,
)
from k8sdds.cni import DEBIAN_CNI
from k8sdds.errors import UserError
from k8sdds.images.debian_node import Deb
from k8sdds.model import DEBIAN_ARCH
from k8sdds.results import sha256

DPKG = ("env", "DEBIAN_FRONTEND=noninteractive", "dpkg")
# dpkg refuses while another holds its lock (a Pi's daily apt timer, unattended-upgrades: on
# the emulated armhf machine, 2026-11-29, `reset --purge` met "dpkg frontend lock was locked
# by another process"): tried again every LOCK_PAUSE seconds for up to LOCK_WAIT
LOCKED = ("locked by another process", "FAQ#db-lock")
LOCK_WAIT, LOCK_PAUSE = 600.0, 10.0


def dpkg(remote: Remote, args: tuple[str, ...], timeout: float,
         sleep: Callable[[float], None] = time.sleep) -> Result:
    """dpkg `args` as root; while another process holds dpkg's lock, the same again after
    a pause (the host's log keeps each try), up to LOCK_WAIT seconds."""
    waited = 0.0
    while True:
        done = remote.run((*DPKG, *args), root=True, timeout=timeout)
        held = done.code != 0 and any(s in done.out + done.err for s in LOCKED)
        if not held or remote.dry_run or waited >= LOCK_WAIT:
            return done
        sleep(LOCK_PAUSE)
        waited += LOCK_PAUSE


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Bundle:
    """What install copies to hosts of one architecture, prepared on this machine."""

    arch: str  # Debian's name
    version: str  # the Kubernetes parts'
    parts: dict[str, Path]  # name -> built binary
    debs: tuple[Deb, ...]

    def parts_for(self, role: str) -> dict[str, Path]:
        names = PARTS + (CONTROL_PLANE_PARTS if role == "control-plane" else ())
        return {n: self.parts[n] for n in names}


def bundle(arch: str, say: Callable[[str], None] = lambda _: None,
           mirror: str | None = None) -> Bundle:
    """The parts for inventory architecture `arch` (amd64, arm64, arm): k8sdds' builds, or a
    UserError saying how to build them; Debian's packages, downloaded once."""
    from k8sdds.images import debian_node
    from k8sdds.images import kubernetes as k8s

    debian = DEBIAN_ARCH[arch]
    names = PARTS + CONTROL_PLANE_PARTS
    folder = k8s.arch_binaries(arch)
    lacking = [n for n in names if not (folder / n).exists()]
    if lacking:
        how = (".ci/k8s-test-binaries" if arch == k8s.HOST_GOARCH else
               f"K8S_COMPONENTS='{' '.join(names)}' .ci/k8s-cross-binaries {arch} kubernetes")
        raise UserError(f"{', '.join(lacking)} for {arch} not built in {folder}: build them "
                        f"with {how} (needs Go; `make test-deps` builds them for amd64, arm64 "
                        "and arm)")
    versions = {k8s.built_version(folder, n) for n in names}
    if len(versions) != 1:
        raise UserError(f"{', '.join(names)} for {arch} in {folder} are of different versions "
                        f"({', '.join(sorted(versions))}): build them again")
    kwargs = {"mirror": mirror} if mirror else {}
    debs = debian_node.packages(debian, say=say, **kwargs)
    return Bundle(debian, versions.pop(), {n: (folder / n).resolve() for n in names},
                  tuple(debs))


@dataclass
class Record:
    """What install did on a host, kept there (RECORD) for `cluster reset --purge`."""

    packages: list[str] = field(default_factory=list)  # installed by dpkg, in that order
    parts: dict[str, bool] = field(default_factory=dict)  # path -> an earlier file was kept
    files: dict[str, bool] = field(default_factory=dict)  # path -> an earlier file was kept
    links: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)  # loaded by install
    sysctls: dict[str, str] = field(default_factory=dict)  # key -> its value before

    @classmethod
    def parse(cls, text: str) -> Record:
        """From the host's RECORD; an empty record when there is none. Pure."""
        if not text.strip():
            return cls()
        try:
            data = json.loads(text)
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except (ValueError, TypeError) as exc:
            raise HostError(f"{RECORD} is damaged ({exc}): remove it by hand, or reinstall "
                            "the host") from None

    def text(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True) + "\n"


def installed(out: str) -> set[str]:
    """The installed packages in `dpkg-query -W -f '${Package} ${Status}\\n'`'s output.
    Pure."""
    found = set()
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 4 and words[2:4] == ["ok", "installed"]:  # wanted: install or hold
            found.add(words[0].split(":")[0])
    return found


def install(remote: Remote, parts: Bundle) -> list[str]:
    """Everything a kubeadm node needs, on one host; what was done."""
    host = remote.host
    started = time.monotonic()
    sent = Sent()
    _preflight(remote, parts.arch)
    kept = remote.run(("cat", RECORD), root=True)
    record = Record.parse(kept.out)
    before = record.text() if kept.code == 0 else ""
    said = [_packages(remote, parts.debs, record, sent)]
    said.append(_parts(remote, parts.parts_for(host.role), parts.version, record, sent))
    changed, what = _files(remote, record, sent)
    said.append(what)
    said.append(_links(remote, record))
    said.append(_kernel(remote, record))
    checked(remote, ("systemctl", "daemon-reload"), root=True)
    checked(remote, ("systemctl", "enable", "containerd.service", "kubelet.service"),
            root=True)
    if "/etc/containerd/config.toml" in changed:
        checked(remote, ("systemctl", "restart", "containerd.service"), root=True)
        said.append("containerd restarted with its new configuration")
    if record.text() != before:
        with remote_file(remote, record.text(), "install-record") as staged:
            checked(remote, ("install", "-D", "-m", "0600", staged, RECORD), root=True)
    if not remote.dry_run:
        said.append(f"{sent.bytes / 1e6:.1f} MB copied in {time.monotonic() - started:.0f} s")
    return said


@dataclass
class Sent:
    """What install copied to a host, counted as it goes."""

    bytes: int = 0


def _preflight(remote: Remote, arch: str) -> None:
    """A Debian host (dpkg, systemd) of the inventory's architecture, or a HostError."""
    host = remote.host
    for tool in ("dpkg", "systemctl"):
        if remote.run(("sh", "-c", f"command -v {tool}")).code != 0:
            raise HostError(f"{host.name}: no {tool}: cluster install needs a Debian host with "
                            "systemd (Raspberry Pi OS, Debian 12)")
    got = remote.run(("dpkg", "--print-architecture")).out.strip()
    if not remote.dry_run and got != arch:
        raise HostError(f"{host.name}: its dpkg is for {got}; the inventory says "
                        f"{host.arch} ({arch}): give the host its arch in the inventory")


def _packages(remote: Remote, debs: tuple[Deb, ...], record: Record, sent: Sent) -> str:
    query = remote.run(("dpkg-query", "-W", "-f", "${Package} ${Status}\\n",
                        *(d.package for d in debs)))
    have = installed(query.out)
    wanted = [d for d in debs if d.package not in have]
    if not wanted:
        return "containerd, runc, CNI plugins: the host's own"
    with ExitStack() as stack:
        staged = [stack.enter_context(remote_copy(remote, d.path, "deb", sha256(d.path)))
                  for d in wanted]
        sent.bytes += sum(d.path.stat().st_size for d in wanted)
        done = dpkg(remote, ("-i", *staged), timeout=1800)
        if done.code != 0:
            # what dpkg left unpacked or half-configured is taken away: the host as it was
            dpkg(remote, ("--purge", *(d.package for d in wanted)), timeout=600)
            raise HostError(f"{remote.host.name}: dpkg -i failed: {last_line(done)[:300]} "
                            "(nothing installed)")
    record.packages += [d.package for d in wanted if d.package not in record.packages]
    return (f"{len(wanted)} Debian packages installed ("
            + ", ".join(f"{d.package} {d.version}" for d in wanted) + ")")


def _keep(remote: Remote, path: str) -> None:
    """A copy of the host's own `path`, before install replaces it (for --purge)."""
    checked(remote, ("mkdir", "-p", str(Path(KEPT + path).parent)), root=True)
    checked(remote, ("cp", "-p", path, KEPT + path), root=True)


def _sums(remote: Remote, paths: list[str]) -> dict[str, str]:
    """Each existing path's SHA-256 on the host."""
    out = remote.run(("sha256sum", *paths), root=True).out
    return {line.split(None, 1)[1].strip(): line.split()[0] for line in out.splitlines()
            if len(line.split()) == 2}


@dataclass(frozen=True)
class Placed:
    """One file install puts on a host: where, its SHA-256 and mode, its size, and how it is
    staged on the host (a copy of a local file, or a text)."""

    target: str
    sha256: str
    mode: int
    size: int
    stage: Callable[[], AbstractContextManager[str]]


def _place(remote: Remote, items: list[Placed], owned: dict[str, bool], sent: Sent
           ) -> list[str]:
    """Each item onto the host where the host's file differs from it: the host's own file
    kept first (for --purge), the staged copy installed, then checked by SHA-256 where it
    lands (once: a second pass over the staged copy costs a slow board as much again); the
    targets written. `owned` (the record's): target -> an earlier file was kept."""
    sums = _sums(remote, [i.target for i in items])
    written = []
    for item in items:
        if sums.get(item.target) == item.sha256:
            continue
        if item.target in sums and item.target not in owned:
            _keep(remote, item.target)
        with item.stage() as staged:
            checked(remote, ("install", "-D", "-m", f"{item.mode:04o}", staged, item.target),
                    root=True)
        sent.bytes += item.size
        if not remote.dry_run and _sums(remote, [item.target]).get(item.target) != \
                item.sha256:
            raise HostError(f"{remote.host.name}: {item.target} differs from what was sent")
        owned.setdefault(item.target, item.target in sums)
        written.append(item.target)
    return written


def _parts(remote: Remote, parts: dict[str, Path], version: str, record: Record,
           sent: Sent) -> str:
    written = _place(remote, [
        Placed(f"{BIN}/{name}", sha256(path), 0o755, path.stat().st_size,
               lambda path=path, name=name: remote_copy(remote, path, name))
        for name, path in parts.items()], record.parts, sent)
    state = "" if written or remote.dry_run else " (already)"
    return f"{', '.join(parts)} v{version} in {BIN}{state}"


def _files(remote: Remote, record: Record, sent: Sent) -> tuple[set[str], str]:
    changed = set(_place(remote, [
        Placed(f.path, digest(f.text), f.mode, len(f.text.encode()),
               lambda f=f: remote_file(remote, f.text, Path(f.path).name))
        for f in FILES], record.files, sent))
    return changed, (f"{len(changed)} of {len(FILES)} configuration files written"
                     + (f" ({', '.join(sorted(changed))})" if changed else ""))


def _links(remote: Remote, record: Record) -> str:
    plugins = remote.run(("ls", DEBIAN_CNI)).out.split()
    lacking = [p for p in PLUGINS if p not in plugins]
    if lacking and not remote.dry_run:
        raise HostError(f"{remote.host.name}: {DEBIAN_CNI} has no {', '.join(lacking)}: "
                        "reinstall containernetworking-plugins (dpkg -i, or apt-get install "
                        "--reinstall)")
    present = set(remote.run(("ls", "-A", CNI_BIN)).out.split())
    new = [p for p in plugins if p not in present]
    if new:
        checked(remote, ("mkdir", "-p", CNI_BIN), root=True)
        checked(remote, ("ln", "-s", *(f"{DEBIAN_CNI}/{p}" for p in new), CNI_BIN + "/"),
                root=True)
        record.links += [f"{CNI_BIN}/{p}" for p in new if f"{CNI_BIN}/{p}" not in record.links]
    return (f"{len(new)} CNI plugins linked into {CNI_BIN}" if new
            else f"CNI plugins in {CNI_BIN} (already)")


def _kernel(remote: Remote, record: Record) -> str:
    done = []
    for module, probe in MODULES:
        if remote.run(probe).code != 0:
            checked(remote, ("modprobe", module), root=True)
            if module not in record.modules:
                record.modules.append(module)
            done.append(f"{module} loaded")
    for key, value in SYSCTLS:
        now = remote.run(("sysctl", "-n", key))
        if now.code == 0 and now.out.strip() == value:
            continue
        checked(remote, ("sysctl", "-w", f"{key}={value}"), root=True)
        if now.code == 0:
            record.sysctls.setdefault(key, now.out.strip())
        done.append(f"{key} = {value}")
    return "kernel: " + (", ".join(done) if done else "modules and sysctls already set")


def purge(remote: Remote) -> list[str]:
    """Undo what install did on the host (its RECORD): the host as it was before."""
    text = remote.run(("cat", RECORD), root=True)
    if text.code != 0 and not remote.dry_run:
        return ["nothing of cluster install's to remove"]
    record = Record.parse(text.out)
    remote.run(("systemctl", "disable", "--now", "kubelet.service"), root=True)
    said = []
    for paths in (record.parts, record.files):
        for path, kept in paths.items():
            checked(remote, ("rm", "-f", path), root=True)
            if kept:
                checked(remote, ("cp", "-p", KEPT + path, path), root=True)
    for folder in ("/etc/systemd/system/kubelet.service.d", "/etc/containerd"):
        remote.run(("rmdir", "--ignore-fail-on-non-empty", folder), root=True)
    said.append(f"{len(record.parts) + len(record.files)} files removed (those it replaced "
                "put back)")
    if record.links:
        checked(remote, ("rm", "-f", *record.links), root=True)
        remote.run(("rmdir", "--ignore-fail-on-non-empty", CNI_BIN), root=True)
    if record.packages:
        # the named packages before what they depend on
        purged = dpkg(remote, ("--purge", *reversed(record.packages)), timeout=1800)
        if purged.code != 0 and not remote.dry_run:
            raise HostError(f"dpkg --purge: {last_line(purged)[:200]}")
        said.append(f"{len(record.packages)} Debian packages purged")
        if "containerd" in record.packages:  # the images and state of the containerd it made
            checked(remote, ("rm", "-rf", "/var/lib/containerd", "/run/containerd",
                             "/opt/containerd"), root=True)
    for key, value in record.sysctls.items():
        remote.run(("sysctl", "-w", f"{key}={value}"), root=True)
    stay = [m for m in reversed(record.modules)
            if remote.run(("modprobe", "-r", m), root=True).code != 0]
    if record.sysctls or record.modules:
        said.append("kernel settings put back" + (f" (in use, still loaded: {', '.join(stay)})"
                                                   if stay else ""))
    checked(remote, ("systemctl", "daemon-reload"), root=True)
    checked(remote, ("rm", "-rf", STATE), root=True)
    remote.run(("rmdir", "--ignore-fail-on-non-empty", str(Path(STATE).parent)), root=True)
    return said


def plan_text(parts: dict[str, Bundle]) -> list[str]:
    """What install will copy, per architecture (for --dry-run). Pure."""
    return [f"{arch}: " + ", ".join(f"{n} v{b.version}" for n in b.parts) + "; "
            + ", ".join(f"{d.package} {d.version}" for d in b.debs) + " (each only where "
            "the host lacks it)" for arch, b in parts.items()]
