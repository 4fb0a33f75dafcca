"""A fake backend for the runner's own logic (resume, failures, stops, a full disk): roles
"run" by writing real ddsperf output (tests/fixtures/ddsperf) to their logs. A unit-test
fake only: every backend is tested for real in its own end-to-end tests."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from k8sdds.deployment import Handle, Placement
from k8sdds.engines import Command
from k8sdds.errors import DeploymentError
from k8sdds.model import PATHS, Limits, Test

from .conftest import FIXTURES

LOGS = {"pub": FIXTURES / "ddsperf" / "throughput-pub-hostgw-1k.log",
        "sub": FIXTURES / "ddsperf" / "throughput-sub-hostgw-1k.log"}


@dataclass
class FakeBackend:
    """`fail_deploy`: repeat numbers (in the order they run, from 1) whose deploy fails;
    `exit_codes`: role -> its exit status; `before_repeat(n)`: called as repeat n starts."""

    name: str = "emulated"
    local_engines: bool = False
    images: bool = False
    fail_deploy: set[int] = field(default_factory=set)
    exit_codes: dict[str, int] = field(default_factory=dict)
    before_repeat: Callable[[int], None] | None = None
    deployed: int = 0
    ups: int = 0
    downs: int = 0
    started: list[str] = field(default_factory=list)
    wired: list[str] = field(default_factory=list)  # use_datapath's names, in order
    ran: list[tuple[int, int]] = field(default_factory=list)  # (test, repeat) deployed
    logs: dict[str, Path] = field(default_factory=lambda: dict(LOGS))  # what pub, sub print
    fingerprinted: list[tuple[int, int]] = field(default_factory=list)  # (test, repeat)
    multicast: dict | None = None  # the multicast probe's record its fingerprints hold
    serving: set[str] = field(default_factory=set)  # roles that run until they are stopped
    stops: list[list[str]] = field(default_factory=list)  # each stop's roles, in order

    def limits(self) -> Limits:
        return Limits(max_subscribers=8, paths=PATHS)

    def datapaths(self) -> Sequence[str]:
        return ["host", "flannel-hostgw"]

    def unavailable(self, datapath: str) -> str | None:
        return None if datapath in self.datapaths() else "not offered"

    def up(self) -> None:
        self.ups += 1

    def use_datapath(self, name: str) -> None:
        self.wired.append(name)

    def start_lead(self, roles: int) -> float:
        return 0.0

    def count_traffic(self, nodes, folder, start) -> None:
        return None

    def deploy(self, test: Test, roles: Sequence[str], repeat: int = 1,
               service_ports: Sequence[tuple[int, str]] = ()) -> Mapping[str, Placement]:
        self.deployed += 1
        self.ran.append((test.number, repeat))
        if self.before_repeat:
            self.before_repeat(self.deployed)
        if self.deployed in self.fail_deploy:
            raise DeploymentError("node1 is not Ready")
        return {r: Placement(r, f"node{i + 1}", f"10.0.0.{i + 1}", "eth0", r)
                for i, r in enumerate(roles)}

    def role_dirs(self, config_dir: Path, secrets_dir: Path) -> tuple[str, str]:
        return str(config_dir), str(secrets_dir)

    def start(self, placement: Placement, command: Command, log: Path,
              listen: int | None = None) -> Handle:
        shutil.copyfile(self.logs["pub" if placement.role == "pub" else "sub"], log)
        self.started.append(placement.role)
        return Handle(placement.role, None, log, ref=placement.role)

    def ready(self, handles: Sequence[Handle]) -> None:
        pass

    def wait_listening(self, handle: Handle, port: int, timeout: float) -> bool:
        return True

    def wait(self, handle: Handle, timeout: float) -> int | None:
        return None if handle.role in self.serving else self.exit_codes.get(handle.role, 0)

    def stop(self, handles: Sequence[Handle], grace: float = 2.0) -> dict[str, int]:
        if handles:
            self.stops.append([h.role for h in handles])
        return {h.role: self.exit_codes.get(h.role, 0) for h in handles}

    def teardown(self) -> None:
        pass

    def down(self) -> None:
        self.downs += 1

    def describe(self) -> dict:
        return {"nodes": [{"name": "node1", "arch": "amd64"}, {"name": "node2", "arch": "arm64"}],
                "not_applied": []}  # a hybrid cluster

    def fingerprint(self, placement) -> dict:
        self.fingerprinted.append(self.ran[-1])
        return {p.node: {"kernel": "fake", **({"multicast": self.multicast}
                                              if self.multicast else {})}
                for p in placement.values()}

    def usage(self) -> dict[str, float]:
        return {"softirq_s": 0.0}

    def role_cpu(self, handles) -> dict:
        return {}  # a fake process uses no CPU to speak of

    def node_cpu(self) -> dict[str, float]:
        return {}
