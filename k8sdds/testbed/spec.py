"""The shape of an emulated cluster: nodes with name, role, architecture label and profile.

Written by hand as YAML (`--spec FILE`) or made from defaults (1 control-plane + N
workers); validated like schedules: one clear error naming the file, node, field and value.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from k8sdds.errors import UserError
from k8sdds.model import NODE_ROLES
from k8sdds.testbed.profiles import PROFILES

DEFAULT_NAME = "k8sdds"  # the testbed a run, `testbed up` and the service use by default

ARCHS = ("amd64", "arm64", "arm")
NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,18}[a-z0-9])?$")
MAX_NODES = 64


@dataclass(frozen=True)
class NodeSpec:
    name: str
    role: str = "worker"
    arch: str = "amd64"
    profile: str = "cloud"


@dataclass(frozen=True)
class TestbedSpec:
    """The nodes of an emulated testbed (the `--spec` file, or the defaults)."""

    __test__ = False  # not a pytest test class

    name: str = DEFAULT_NAME
    nodes: tuple[NodeSpec, ...] = ()

    def __post_init__(self) -> None:
        if not self.nodes:
            object.__setattr__(self, "nodes", default_nodes(4).nodes)

    def to_dict(self) -> dict:
        return {"name": self.name, "nodes": [asdict(n) for n in self.nodes]}

    @classmethod
    def from_dict(cls, data: dict) -> TestbedSpec:
        return cls(name=data["name"], nodes=tuple(NodeSpec(**n) for n in data["nodes"]))

    def workers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.role == "worker"]


class SpecError(UserError):
    """The testbed spec is not valid."""


def _only(mapping: dict, allowed: tuple[str, ...], where: str, what: str) -> None:
    """Refuse keys outside `allowed`, naming them and what is allowed."""
    unknown = sorted(set(mapping) - set(allowed), key=str)
    if unknown:
        raise SpecError(f"{where}: unknown {what}(s) {', '.join(map(str, unknown))}; "
                        f"allowed: {', '.join(allowed)}")


def default_nodes(count: int, profile: str | None = None, name: str = DEFAULT_NAME
                  ) -> TestbedSpec:
    """node0 is the control plane; node1..node<count-1> are workers with `profile`."""
    if not 2 <= count <= MAX_NODES:
        raise SpecError(f"a cluster has 2 to {MAX_NODES} nodes, not {count}")
    check_profile(profile or "cloud", "--profile")
    nodes = [NodeSpec("node0", "control-plane")] + [
        NodeSpec(f"node{i}", "worker", profile=profile or "cloud") for i in range(1, count)]
    return TestbedSpec(name=name, nodes=tuple(nodes))


def check_profile(profile: str, where: str) -> None:
    """Fail with the allowed names (and the nearest one) unless `profile` is a profile."""
    if profile not in PROFILES:
        hint = difflib.get_close_matches(profile, list(PROFILES), n=1)
        extra = f" (did you mean '{hint[0]}'?)" if hint else ""
        raise SpecError(f"{where}: unknown profile {profile!r}; allowed: "
                        f"{', '.join(PROFILES)}{extra}")


def load(path: str | Path, name: str | None = None, profile: str | None = None
         ) -> TestbedSpec:
    """Read a YAML testbed spec. `profile`, if given, applies to workers without one; `name`
    (the command line's, if given) must agree with the spec's own `name`, if it has one."""
    from k8sdds.guarded import FileRefused, load_yaml

    path = Path(path)
    try:
        data = load_yaml(path, "testbed spec")
    except FileRefused as exc:
        raise SpecError(str(exc)) from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping with `nodes:` (or `workers:`)")
    _only(data, ("name", "nodes", "workers", "profile"), str(path), "key")
    if name is not None and "name" in data and str(data["name"]) != name:
        raise SpecError(f"{path}: the spec names the testbed {data['name']!r}, the command "
                        f"line {name!r}: give one name (the namespaces and the lock take it)")
    name = str(data.get("name", name or DEFAULT_NAME))
    if not NAME.match(name) or len(name) > 12:
        raise SpecError(f"{path}: name {name!r}: lower-case letters, digits and '-', at most "
                        "12 characters")
    profile = data.get("profile", profile)
    if profile is not None:
        if not isinstance(profile, str):
            raise SpecError(f"{path}, field 'profile': value {str(profile)[:40]!r}: a profile "
                            "name")
        check_profile(profile, f"{path}, field 'profile'")
    if "nodes" not in data:
        workers = data.get("workers", 3)
        if (not isinstance(workers, int) or isinstance(workers, bool)
                or not 1 <= workers < MAX_NODES):
            raise SpecError(f"{path}, field 'workers': value {str(workers)[:40]!r}: a whole "
                            f"number from 1 to {MAX_NODES - 1}")
        spec = default_nodes(workers + 1, profile, name)
        return spec
    raw = data["nodes"]
    if not isinstance(raw, list) or not raw:
        raise SpecError(f"{path}: nodes: a non-empty list of nodes")
    if not 2 <= len(raw) <= MAX_NODES:  # before any per-node work
        raise SpecError(f"{path}: a cluster has 2 to {MAX_NODES} nodes, not {len(raw)}")
    nodes, names = [], set()
    for i, entry in enumerate(raw):
        where = f"{path}, node {i + 1}"
        if not isinstance(entry, dict):
            raise SpecError(f"{where}: expected a mapping with name, role, arch, profile")
        _only(entry, ("name", "role", "arch", "profile"), where, "field")
        node = NodeSpec(name=str(entry.get("name", f"node{i}")),
                        role=str(entry.get("role", "worker")),
                        arch=str(entry.get("arch", "amd64")),
                        profile=str(entry.get("profile", profile or "cloud")))
        if not NAME.match(node.name):
            raise SpecError(f"{where}, field 'name': value {node.name!r}: lower-case letters, "
                            "digits and '-', at most 20 characters")
        if node.role not in NODE_ROLES:
            raise SpecError(f"{where}, field 'role': value {node.role!r}; allowed: "
                            f"{', '.join(NODE_ROLES)}")
        if node.arch not in ARCHS:
            raise SpecError(f"{where}, field 'arch': value {node.arch!r}; allowed: "
                            f"{', '.join(ARCHS)}")
        check_profile(node.profile, f"{where}, field 'profile'")
        if node.name in names:
            raise SpecError(f"{where}, field 'name': duplicate node name {node.name!r}")
        names.add(node.name)
        nodes.append(node)
    return TestbedSpec(name=name, nodes=tuple(nodes))
