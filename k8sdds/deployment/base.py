"""The backend interface: where the processes of a test execute."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from k8sdds.deployment.reaping import CpuUse
from k8sdds.engines.base import Command
from k8sdds.model import Limits, Test


@dataclass(frozen=True)
class Placement:
    """Where one role runs."""

    role: str
    node: str
    address: str  # the role's IP address
    interface: str  # the interface DDS must use there
    where: str  # backend-specific location (a namespace, a pod name, a host)
    hostname: str = ""  # what the role's processes see as their host name
    ports: Mapping[int, int] = field(default_factory=dict)  # listening port -> port to dial


@dataclass
class Handle:
    """A started role: its process and its log."""

    role: str
    proc: subprocess.Popen | None  # a local process (emulated), or None (a pod: see `ref`)
    log: Path
    stopped: bool = False  # True once we stopped it ourselves
    ref: str = ""  # the backend's name for it where there is no local process (a pod)
    cpu: CpuUse | None = None  # what its process used over its life, once reaped


def shippable(folder: Path | None) -> dict[str, bytes]:
    """What of the run's private directory (credentials, license) a backend must copy to
    where the roles run: every file but the CA's key, which never leaves this machine."""
    if folder is None or not Path(folder).is_dir():
        return {}
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir())
            if p.is_file() and p.name != "ca.key"}


def mentions(command: Command, text: str) -> bool:
    """Whether `text` (a directory the backend provides) appears in the command at all."""
    return any(text in part for part in (*command.argv, *command.env.values(),
                                         *command.files.values()))


class Backend(Protocol):
    name: str
    local_engines: bool  # the engines run on this machine (else in the backend's image)
    images: bool  # roles run in container images (--image, --rtiperftest-image)

    def limits(self) -> Limits:
        """What this backend can place, for schedule validation."""

    def datapaths(self) -> Sequence[str]:
        """The datapaths this backend can offer."""

    def unavailable(self, datapath: str) -> str | None:
        """Why this machine cannot offer `datapath` (one line), or None."""

    def up(self) -> None:
        """Make the cluster ready (reusing one that is already up)."""

    def use_datapath(self, name: str) -> None:
        """Configure datapath `name` for the tests that follow."""

    def deploy(self, test: Test, roles: Sequence[str], repeat: int = 1,
               service_ports: Sequence[tuple[int, str]] = ()) -> Mapping[str, Placement]:
        """Create what the roles need for repeat `repeat` and say where each runs;
        `service_ports`: what a Service in front of the server must forward (the engine's
        `service_ports`), for the paths through one."""

    def role_dirs(self, config_dir: Path, secrets_dir: Path) -> tuple[str, str]:
        """Where the roles see the repeat's configuration files and the run's secrets (the
        paths engines write into commands); the runner writes both on this machine."""

    def count_traffic(self, nodes: Sequence[str], folder: Path, start: float) -> None:
        """Sample each of `nodes`' uplink counters into folder/counters-NODE.log
        (parsers.counters) from the wall-clock instant `start` (RoleContext.start_at) until
        `teardown`; nothing where this backend cannot yet."""

    def start_lead(self, roles: int) -> float:
        """Seconds this backend takes, at most, to start `roles` processes (roles, and the
        counter samplers of `count_traffic`) one after the other (RoleContext.start_at:
        roles that start together wait until then)."""

    def start(self, placement: Placement, command: Command, log: Path,
              listen: int | None = None) -> Handle:
        """Start one role (argv, environment, files) with its output going to `log`;
        `listen`: the TCP port the role will serve on, if any."""

    def ready(self, handles: Sequence[Handle]) -> None:
        """Return once the roles are running; raise TestbedError with the reason when one
        cannot start (image, node, crash) or is not running within the backend's bound."""

    def wait_listening(self, handle: Handle, port: int, timeout: float) -> bool:
        """Wait until the role listens on TCP `port` (False: it did not within `timeout` s,
        or it exited)."""

    def wait(self, handle: Handle, timeout: float) -> int | None:
        """The role's exit status, or None if it is still running after `timeout` s."""

    def stop(self, handles: Sequence[Handle], grace: float = 2.0) -> dict[str, int]:
        """Stop roles together (SIGTERM, then SIGKILL after `grace` s); exit status by role."""

    def teardown(self) -> None:
        """Remove what deploy created (after every repeat, also on failure)."""

    def down(self) -> None:
        """Remove the cluster if this backend brought it up."""

    def describe(self) -> dict:
        """The cluster, for the manifest."""

    def fingerprint(self, placement: Mapping[str, Placement]) -> dict[str, dict]:
        """Each node of `placement` (a repeat just deployed, no role started) -> its
        environment fingerprint (k8sdds.fingerprint.node): taken once per datapath, for the
        manifest."""
        return {}

    def role_cpu(self, handles: Sequence[Handle]) -> Mapping[str, CpuUse]:
        """What each role's process used over its life, once it has ended and been reaped
        (`stop`, `wait`, `teardown`); none where this backend cannot read it."""

    def node_cpu(self) -> dict[str, float]:
        """Each node's CPU seconds so far, from its cgroup's own counter; none where this
        backend cannot read it. The runner takes the difference over a repeat."""

    def usage(self) -> dict[str, float]:
        """Cumulative CPU seconds the datapath itself has used so far, by counter
        (`datapath_cpu_s`: its own processes, such as wireguard-go, or the CNI's pods;
        `softirq_s`: the kernel's packet processing; `node_cpu_s`: the nodes'). The runner
        takes the difference over a repeat; keys ending in `_mb` are levels
        (`datapath_memory_mb`: the CNI pods' memory), kept as read at the end."""
