"""Backends by name. The runner never branches on a backend; the CLI builds one here from
the options the user gave, each backend taking only its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from k8sdds.deployment.base import Backend, Handle, Placement
from k8sdds.deployment.emulated import EmulatedBackend
from k8sdds.deployment.kubernetes import KubernetesBackend
from k8sdds.deployment.options import EmulatedOptions, KubernetesOptions, SshOptions
from k8sdds.deployment.ssh import SshBackend
from k8sdds.errors import UserError
from k8sdds.flags import build


@dataclass(frozen=True)
class BackendType:
    options: type  # the backend's options dataclass (deployment.options)
    factory: Callable[[Any], Backend]


BACKENDS: dict[str, BackendType] = {
    "emulated": BackendType(EmulatedOptions, EmulatedBackend),
    "kubernetes": BackendType(KubernetesOptions, KubernetesBackend),
    "ssh": BackendType(SshOptions, SshBackend),
}


def owner(option: str) -> tuple[str, str]:
    """The backend whose option `option` (a field name) is, and its flag."""
    for name, kind in BACKENDS.items():
        for f in fields(kind.options):
            if f.name == option:
                return name, f.metadata["flag"]
    raise KeyError(option)


def options_of(name: str, given: Mapping[str, Any]) -> Any:
    """Backend `name`'s options from every backend option given (None: not given); an
    option of another backend is refused, naming whose it is."""
    if name not in BACKENDS:
        raise UserError(f"--backend {name!r} is not one of {', '.join(BACKENDS)}")
    cls = BACKENDS[name].options
    own = {f.name: f for f in fields(cls)}
    for key, value in given.items():
        if value is not None and key not in own:
            other, flag = owner(key)
            raise UserError(f"{flag} is an option of --backend {other}, not {name}")
    return build(cls, dict(given))


__all__ = ["BACKENDS", "Backend", "BackendType", "Handle", "Placement", "options_of",
           "owner"]
