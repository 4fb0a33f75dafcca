"""`k8sdds cluster tune [--revert]`: the network tuning of K8sDDS as a sysctl drop-in,
idempotent, with the values it replaced recorded so that --revert restores them."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from k8sdds.cluster.remote import HostError, Remote

# the K8sDDS tuning: large socket buffers and backlog for DDS's bursts of UDP
SETTINGS: dict[str, str] = {
    "net.core.rmem_max": "2147483647",
    "net.core.wmem_max": "2147483647",
    "net.core.rmem_default": "65536",
    "net.core.wmem_default": "65536",
    "net.ipv4.tcp_rmem": "4096 87380 2147483647",
    "net.ipv4.tcp_wmem": "4096 65536 2147483647",
    "net.ipv4.tcp_mem": "2147483647 2147483647 2147483647",
    "net.core.netdev_max_backlog": "30000",
    "net.ipv4.ipfrag_high_thresh": "8388608",
}
DROP_IN = "/etc/sysctl.d/90-k8sdds.conf"
PREVIOUS = "/etc/k8sdds/sysctl-previous.conf"  # what the first tune replaced


@dataclass(frozen=True)
class Change:
    key: str
    before: str
    after: str


def render(values: Mapping[str, str], header: str) -> str:
    return f"# {header}\n" + "".join(f"{k} = {v}\n" for k, v in values.items())


def parse(text: str) -> dict[str, str]:
    """`key = value` lines (sysctl.conf syntax) -> {key: value}; comments skipped."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";")) and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = " ".join(value.split())
    return out


def _path(root: str, path: str, host: str = "") -> str:
    """`path` under `root` ({host} in it: the host's name), or `path` itself."""
    return root.replace("{host}", host).rstrip("/") + path if root else path


def tune(remote: Remote, keys: Sequence[str], root: str = "") -> list[Change]:
    """Write the drop-in and apply it; record the values it replaces once (a second tune
    keeps the first record, so --revert goes back to before k8sdds)."""
    current = {k: _read(remote, k) for k in keys}
    previous = _path(root, PREVIOUS, remote.host.name)
    recorded = remote.run(["cat", previous], root=True)
    if recorded.code != 0:  # first tune: record what was there
        _write(remote, previous, render(current, "values before k8sdds cluster tune"))
    wanted = {k: SETTINGS[k] for k in keys}
    _write(remote, _path(root, DROP_IN, remote.host.name),
           render(wanted, "k8sdds cluster tune (K8sDDS)"))
    changes = []
    for key, value in wanted.items():
        _apply(remote, key, value)
        changes.append(Change(key, current[key], value))
    return changes


def revert(remote: Remote, root: str = "") -> list[Change]:
    """Restore the recorded values, remove the drop-in and the record."""
    previous = _path(root, PREVIOUS, remote.host.name)
    recorded = remote.run(["cat", previous], root=True)
    if recorded.code != 0:
        return []  # never tuned (or reverted already): nothing to do
    changes = []
    for key, value in parse(recorded.out).items():
        now = _read(remote, key)
        _apply(remote, key, value)
        changes.append(Change(key, now, value))
    remote.run(["rm", "-f", _path(root, DROP_IN, remote.host.name), previous], root=True)
    return changes


def _read(remote: Remote, key: str) -> str:
    r = remote.run(["sysctl", "-n", key])
    if r.code != 0 and not remote.dry_run:
        raise HostError(f"sysctl -n {key}: {r.err.strip() or 'exit ' + str(r.code)}")
    return " ".join(r.out.split())


def _apply(remote: Remote, key: str, value: str) -> None:
    r = remote.run(["sysctl", "-w", f"{key}={value}"], root=True)
    if r.code != 0 and not remote.dry_run:
        raise HostError(f"sysctl -w {key}: {r.err.strip() or 'exit ' + str(r.code)}")


def _write(remote: Remote, path: str, text: str) -> None:
    """A file as root, whole: written beside, then renamed."""
    folder = path.rsplit("/", 1)[0] or "/"
    new = f"{path}.k8sdds-{secrets.token_hex(4)}"
    for argv in (["mkdir", "-p", folder], ["tee", new], ["mv", new, path]):
        r = remote.run(argv, root=True, stdin=text if argv[0] == "tee" else None)
        if r.code != 0 and not remote.dry_run:
            raise HostError(f"{argv[0]} {path}: {r.err.strip() or 'exit ' + str(r.code)}")
