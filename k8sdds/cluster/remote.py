"""Commands on bare hosts over SSH (paramiko), with their host keys verified.

A remote command is an argv list; it crosses SSH as one shell line, so it is quoted with
shlex.join and nothing else. Host keys come from known_hosts and are never accepted
automatically: an unknown host is an error that shows its key (SHA256, as `ssh-keygen -lf`
shows it) and how to accept it. Every command and its output go into a per-host log.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shlex
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from k8sdds.cluster.inventory import Host
from k8sdds.errors import UserError

CONNECT_TIMEOUT = 10.0  # seconds to reach the host's port
# seconds for its banner and the authentication, and to open each command's channel: a
# slow board's sshd (an emulated armhf machine under load took more than 10 s to open one)
HANDSHAKE_TIMEOUT = 30.0
CONNECT_ATTEMPTS = 3  # a handshake the host dropped is tried again (not a refused key)
COMMAND_TIMEOUT = 120.0
T = TypeVar("T")


class HostError(Exception):
    """One host cannot be reached or verified; the others go on."""


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    code: int
    out: str
    err: str


def key_sha256(key_bytes: bytes) -> str:
    """A public key blob as OpenSSH shows it (`ssh-keygen -lf`: SHA256:...)."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key_bytes).digest()).decode().rstrip("=")


class Remote:
    """One SSH connection to `host`, or with `dry_run` none: commands are only logged."""

    def __init__(self, host: Host, known_hosts: str, log: Path | None = None,
                 dry_run: bool = False, sudo: bool | None = None):
        self.host = host
        self.known_hosts = known_hosts
        self.dry_run = dry_run
        self.sudo = host.user != "root" if sudo is None else sudo
        self._log = open(log, "a") if log else None
        self._client = None

    def __enter__(self) -> Remote:
        if not self.dry_run:
            self._connect()
        return self

    def __exit__(self, *exc) -> None:
        if self._client is not None:
            self._client.close()
        if self._log:
            self._log.close()

    def _connect(self) -> None:
        import paramiko

        h = self.host
        client = paramiko.SSHClient()
        if os.path.lexists(self.known_hosts):
            from k8sdds.guarded import FileRefused, read_text

            try:  # a regular file of sane size, UTF-8, before paramiko parses it
                read_text(self.known_hosts, "known_hosts")
                client.load_host_keys(self.known_hosts)
            except (FileRefused, paramiko.SSHException, ValueError) as exc:
                raise HostError(f"known_hosts {exc}") from None
        # else nothing is known: the host is unknown, said below
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            for attempt in range(1, CONNECT_ATTEMPTS + 1):
                try:
                    client.connect(h.address, port=h.port, username=h.user, key_filename=h.key,
                                   timeout=CONNECT_TIMEOUT, banner_timeout=HANDSHAKE_TIMEOUT,
                                   auth_timeout=HANDSHAKE_TIMEOUT, allow_agent=h.key is None,
                                   look_for_keys=h.key is None)
                    break
                except paramiko.SSHException as exc:
                    # a host too busy to finish the handshake (an emulated Pi starting its
                    # pods) drops it, said as "No existing session": once more, a little
                    # later; a key that is wrong or unknown is never retried
                    if (attempt == CONNECT_ATTEMPTS or isinstance(exc, paramiko.BadHostKeyException)
                            or "not found in known_hosts" in str(exc)
                            or isinstance(exc, paramiko.AuthenticationException)):
                        raise
                    client.close()
                    time.sleep(2.0 * attempt)
        except paramiko.BadHostKeyException as exc:
            raise HostError(f"the host key of {h.address}:{h.port} does not match "
                            f"{self.known_hosts}: it offers {exc.key.get_name()} "
                            f"{key_sha256(exc.key.asbytes())}, known_hosts has "
                            f"{key_sha256(exc.expected_key.asbytes())}; if the host was "
                            "reinstalled, remove the old line (ssh-keygen -R) and accept the "
                            "new key") from None
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise HostError(self._unknown()) from None
            raise HostError(f"ssh {h.user}@{h.address}:{h.port}: {exc}") from None
        except (OSError, TimeoutError) as exc:
            raise HostError(f"cannot reach {h.address}:{h.port}: "
                            f"{getattr(exc, 'strerror', None) or exc}") from None
        self._client = client

    def _unknown(self) -> str:
        """The error for a host whose key is not known: its key's SHA256 and the remedy."""
        import paramiko

        h = self.host
        try:
            with socket.create_connection((h.address, h.port), CONNECT_TIMEOUT) as sock:
                transport = paramiko.Transport(sock)
                transport.start_client(timeout=CONNECT_TIMEOUT)
                key = transport.get_remote_server_key()
                transport.close()
            shown = f"{key.get_name()} {key_sha256(key.asbytes())}"
        except (OSError, paramiko.SSHException):
            shown = "(its key could not be read)"
        target = f"[{h.address}]:{h.port}" if h.port != 22 else h.address
        return (f"{h.address}:{h.port} is not in {self.known_hosts}; it offers {shown}. If "
                "that is the host's key (compare with `ssh-keygen -lf "
                "/etc/ssh/ssh_host_*_key.pub` on it), accept it with: ssh-keyscan -p "
                f"{h.port} {h.address} >> {self.known_hosts} (known as {target}); k8sdds never "
                "accepts a key by itself")

    def run(self, argv: Sequence[str], root: bool = False, stdin: str | None = None,
            timeout: float = COMMAND_TIMEOUT) -> Result:
        """Run argv on the host (as root through `sudo -n` when `root` and not root)."""
        argv = tuple(str(a) for a in argv)
        if root and self.sudo:
            argv = ("sudo", "-n", "--", *argv)
        line = shlex.join(argv)
        self._write(f"$ {line}\n")
        if self.dry_run:
            return Result(argv, 0, "", "")
        import paramiko

        began = time.monotonic()
        try:
            chan = self._client.get_transport().open_session(timeout=HANDSHAKE_TIMEOUT)
            chan.settimeout(timeout)
            chan.exec_command(line)
            if stdin is not None:
                chan.sendall(stdin.encode())
            chan.shutdown_write()
        except (paramiko.SSHException, OSError, AttributeError) as exc:
            raise HostError(f"{self.host.name}: {line}: the connection failed ({exc})"
                            ) from None
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        # until the exit status and the end of the output (the status may come before the
        # last of a long output is in paramiko's buffer)
        while not (chan.exit_status_ready() and chan.eof_received) or chan.recv_ready() \
                or chan.recv_stderr_ready():
            if chan.recv_ready():
                out += chan.recv(65536)
            elif chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
            elif time.monotonic() > deadline:
                chan.close()
                raise HostError(f"{line}: no answer within {timeout:g} s")
            elif chan.exit_status_ready():
                time.sleep(0.005)  # exited, its output still arriving: no event for that
            else:
                chan.status_event.wait(0.05)  # paramiko's own event: set on exit
        code = chan.recv_exit_status()
        chan.close()
        result = Result(argv, code, out.decode(errors="replace"), err.decode(errors="replace"))
        self._write(result.out + (result.err and f"[stderr] {result.err}") +
                    f"[exit {code}, {time.monotonic() - began:.2f} s]\n")
        return result

    def put(self, local: Path, target: str) -> None:
        """Copy the file `local` to `target` on the host (SFTP, as the login user)."""
        self._write(f"$ sftp put {local} {target}\n")
        if self.dry_run:
            return
        import paramiko

        began = time.monotonic()
        try:
            with self._client.open_sftp() as sftp:
                sent = sftp.put(str(local), target).st_size
        except (paramiko.SSHException, OSError) as exc:
            raise HostError(f"{self.host.name}: copying {local} to {target} failed "
                            f"({getattr(exc, 'strerror', None) or exc}; the host's sshd must "
                            "offer SFTP: Subsystem sftp in sshd_config)") from None
        self._write(f"[{sent / 1e6:.1f} MB in {time.monotonic() - began:.2f} s]\n")

    def _write(self, text: str) -> None:
        if self._log:
            self._log.write(text)
            self._log.flush()


def each_host(hosts: Sequence[Host], work: Callable[[Host], T]) -> dict[str, T | HostError]:
    """`work` on every host at once; a host's HostError is its result, not the end of the
    others."""
    def guarded(host: Host):
        try:
            return work(host)
        except HostError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        return dict(zip((h.name for h in hosts), pool.map(guarded, hosts), strict=True))


def log_dir(path: Path | None) -> Path:
    """Where per-host logs go (made, or a clear error)."""
    target = Path(path or "logs/cluster")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot write host logs to {target}: {exc.strerror}") from None
    return target


def on_hosts(hosts: Sequence[Host], known_hosts: str, dry_run: bool, folder: Path,
             work: Callable[[Remote], T]) -> dict[str, T | HostError]:
    """`work(remote)` on every host at once, each with its own connection and log."""
    def one(host: Host) -> T:
        with Remote(host, known_hosts, folder / f"{host.name}.log", dry_run=dry_run) as remote:
            return work(remote)

    return each_host(hosts, one)


@contextmanager
def remote_copy(remote: Remote, local: Path, name: str, digest: str | None = None
                ) -> Iterator[str]:
    """The file `local` as a fresh file on the host (mktemp, SFTP, mode 0600 of the login
    user; checked against its SHA-256 `digest` there when given) for the length of the
    block, then removed."""
    made = remote.run(["mktemp", f"/tmp/k8sdds-{name}.XXXXXX"])
    if made.code != 0:
        raise HostError(f"{remote.host.name}: mktemp failed: {made.err.strip()}")
    target = made.out.strip() or f"/tmp/k8sdds-{name}.XXXXXX"
    try:
        remote.put(local, target)
        if digest is not None and not remote.dry_run:
            got = remote.run(["sha256sum", target]).out.split()[:1]
            if got != [digest]:
                raise HostError(f"{remote.host.name}: the copy of {local.name} differs from "
                                f"the original (sha256 {got[0] if got else 'unread'})")
        yield target
    finally:
        remote.run(["rm", "-f", target])


@contextmanager
def remote_file(remote: Remote, text: str, name: str) -> Iterator[str]:
    """`text` as a fresh file on the host (`remote_copy`) for the length of the block: for
    files a command reads (a kubeadm configuration, a manifest)."""
    with tempfile.NamedTemporaryFile("w", prefix=f"k8sdds-{name}.", suffix=".tmp") as local:
        local.write(text)
        local.flush()
        with remote_copy(remote, Path(local.name), name) as target:
            yield target


def ssh_answers(address: str, port: int = 22, timeout: float = 2) -> bool:
    """Whether an SSH server answers at address:port (its banner; no login, no key)."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            return conn.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def checked(remote: Remote, argv, root: bool = False, stdin: str | None = None,
            timeout: float = 600) -> Result:
    """Run `argv` on the host; a HostError with what it said last when it fails (never in
    a dry run)."""
    r = remote.run(argv, root=root, stdin=stdin, timeout=timeout)
    if r.code != 0 and not remote.dry_run:
        raise HostError(f"{argv[0]} {argv[1] if len(argv) > 1 else ''}: "
                        f"{last_line(r)[:200]}")
    return r


def last_line(r: Result) -> str:
    """What a failed command said last (its stderr first), or its exit status. Pure."""
    lines = (r.err.strip() or r.out.strip()).splitlines()
    return lines[-1] if lines else f"exit {r.code}"
