"""An ARM test host: `k8sdds vm`'s machine (qemu-system-aarch64 emulating a Cortex-A53 with
Debian's arm64 system, or qemu-system-arm a Cortex-A7 with Debian's armhf one, each with the
Kubernetes node parts k8sdds cross-builds) on the SSH test hosts' bridge, with the test hosts'
key and a known_hosts line of its own host key. Its disk is built once (cached in
/var/cache/k8sdds/vm)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from k8sdds.vm import image
from k8sdds.vm.machine import Machine, Spec, tap_name


def missing(arch: str = "arm64") -> str | None:
    """Why no ARM test host of `arch` (Debian's name) can be made here, or None."""
    return image.missing(image.BOARDS[arch])


@contextmanager
def arm_host(hosts, index: int, name: str, arch: str = "arm64") -> Iterator[Machine]:
    """A machine at the test hosts' address `index` (one no namespace of theirs uses), on
    their bridge, root logging in with their key; down (and its tap gone) after."""
    started = time.monotonic()
    disk = image.disk(image.BOARDS[arch], say=print)
    built = time.monotonic() - started
    spec = Spec(name, f"{hosts.address(index)}/24", f"10.{hosts.net}.0.1",
                f"{hosts.prefix}br", (hosts.directory / "id_ed25519.pub").read_text(), arch)
    machine = Machine(hosts.directory / f"vm-{name}", spec)
    try:
        booted = machine.up(disk, say=print)
        print(f"ARM host {name} ({arch}): disk {built:.0f} s (cached: "
              f"{disk.built()['seconds']} s when built), boot to sshd {booted:.0f} s, "
              f"qemu RSS {machine.rss_mib():.0f} MiB")
        yield machine
    finally:
        print(f"ARM host {name}: qemu RSS at the end {machine.rss_mib():.0f} MiB")
        machine.down()
        # its tap is not among the links the tests' leak checks compare: gone, checked here
        assert not Path(f"/sys/class/net/{tap_name(name)}").exists()


def ssh(hosts, machine: Machine, known_hosts: Path, script: str,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """`script` run by the machine's root shell, its host key checked."""
    return subprocess.run(
        ["ssh", "-i", str(hosts.directory / "id_ed25519"), "-o", "BatchMode=yes",
         "-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes",
         f"root@{machine.spec.ip}", script], capture_output=True, text=True, timeout=timeout)
