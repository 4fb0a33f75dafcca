"""The inventory: the bare hosts of a cluster (YAML), validated like schedules: pure.

    known_hosts: ~/.ssh/known_hosts     # optional; the file host keys are checked against
    defaults: {user: pi, key: ~/.ssh/id_ed25519, port: 22}
    hosts:
      - {name: master, address: 192.168.1.10, role: control-plane, arch: amd64, user: root}
      - {name: pi1, address: 192.168.1.11, role: worker, arch: arm, engine_bin: /opt/k8sdds/bin}

`engine_bin` (optional, an absolute directory): where the engines k8sdds builds (k8sdds-mqtt,
k8sdds-zenoh) are on that host; the ssh backend puts it first on the roles' PATH.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from k8sdds.errors import UserError
from k8sdds.model import NODE_ROLES

ARCHES = ("amd64", "arm64", "arm")
HOST_FIELDS = ("name", "address", "port", "user", "key", "role", "arch", "engine_bin")
TOP_FIELDS = ("hosts", "defaults", "known_hosts")
NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


class InventoryError(UserError):
    """The inventory is not valid; names file, host, field, value and what is allowed."""


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    user: str
    key: str | None  # private key file; None: the ssh agent or default keys
    role: str = "worker"
    arch: str = "amd64"
    port: int = 22
    engine_bin: str = ""  # first on the roles' PATH: where k8sdds' own engines are


@dataclass(frozen=True)
class Inventory:
    hosts: tuple[Host, ...]
    known_hosts: str  # checked, never written

    def control_plane(self) -> Host:
        return next(h for h in self.hosts if h.role == "control-plane")

    def workers(self) -> list[Host]:
        return [h for h in self.hosts if h.role == "worker"]


def load(path: str | Path) -> Inventory:
    from k8sdds.guarded import FileRefused, load_yaml

    path = Path(path)
    try:
        data = load_yaml(path, "inventory")
    except FileRefused as exc:
        raise InventoryError(str(exc)) from None
    return parse(data, str(path))


def parse(data, where: str = "inventory") -> Inventory:
    """An Inventory from loaded YAML; the first problem raises InventoryError."""
    if not isinstance(data, dict):
        raise InventoryError(f"{where}: expected a mapping with `hosts:`")
    _only(data, TOP_FIELDS, where)
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise InventoryError(f"{where}, defaults: expected a mapping")
    _only(defaults, HOST_FIELDS[2:], f"{where}, defaults")
    hosts = data.get("hosts")
    if not isinstance(hosts, list) or not hosts:
        raise InventoryError(f"{where}: `hosts:` must list at least one host")
    out, seen = [], set()
    for i, raw in enumerate(hosts, start=1):
        if not isinstance(raw, dict):
            raise InventoryError(f"{where}, host {i}: expected a mapping")
        _only(raw, HOST_FIELDS, f"{where}, host {i}")
        merged = {**defaults, **raw}
        name = str(merged.get("name", ""))
        at = f"{where}, host {i} ({name or 'unnamed'})"
        if not NAME.match(name):
            raise InventoryError(f"{at}, field name: value {name!r}: lower-case letters, "
                                 "digits and '-', at most 63")
        if name in seen:
            raise InventoryError(f"{at}, field name: value {name!r} is given twice")
        seen.add(name)
        address = str(merged.get("address", "")).strip()
        if not is_address(address):
            raise InventoryError(f"{at}, field address: value {address!r}: a host name "
                                 "(letters, digits, '-' and '.') or an IP address")
        user = str(merged.get("user", "")).strip()
        if not re.match(r"^[a-z_][a-z0-9_-]{0,31}$", user):
            raise InventoryError(f"{at}, field user: value {user!r}: a login name")
        role = str(merged.get("role", "worker"))
        if role not in NODE_ROLES:
            raise InventoryError(f"{at}, field role: value {role!r}; allowed: "
                                 + ", ".join(NODE_ROLES))
        arch = str(merged.get("arch", "amd64"))
        if arch not in ARCHES:
            raise InventoryError(f"{at}, field arch: value {arch!r}; allowed: "
                                 + ", ".join(ARCHES))
        port = merged.get("port", 22)
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise InventoryError(f"{at}, field port: value {port!r}: 1 to 65535")
        key = merged.get("key")
        engine_bin = str(merged.get("engine_bin") or "")
        if engine_bin and not re.match(r"^/[A-Za-z0-9._/+-]*$", engine_bin):
            raise InventoryError(f"{at}, field engine_bin: value {engine_bin!r}: an absolute "
                                 "directory (letters, digits, '.', '_', '-', '+', '/')")
        out.append(Host(name, address, user, str(Path(str(key)).expanduser()) if key else None,
                        role, arch, port, engine_bin))
    if sum(h.role == "control-plane" for h in out) != 1:
        raise InventoryError(f"{where}: exactly one host must have role: control-plane "
                             f"(found {sum(h.role == 'control-plane' for h in out)})")
    known = str(Path(str(data.get("known_hosts") or "~/.ssh/known_hosts")).expanduser())
    return Inventory(tuple(out), known)


HOST_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def is_address(text: str) -> bool:
    """An IPv4 or IPv6 literal, or a host name (RFC 1123 labels, at most 253 characters)."""
    import ipaddress

    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        pass
    return (0 < len(text) <= 253 and not text.replace(".", "").isdigit()
            and all(HOST_LABEL.match(label) for label in text.rstrip(".").split(".")))


def _only(mapping: dict, allowed, where: str) -> None:
    for key in mapping:
        if key not in allowed:
            raise InventoryError(f"{where}: unknown field {str(key)!r}; allowed: "
                                 + ", ".join(allowed))
