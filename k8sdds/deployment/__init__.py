"""Backends by name. The runner never branches on a backend; it looks it up here."""

from __future__ import annotations

from collections.abc import Callable

from k8sdds.deployment.base import Backend, Handle, Placement
from k8sdds.deployment.emulated import EmulatedBackend
from k8sdds.deployment.kubernetes import KubernetesBackend
from k8sdds.deployment.ssh import SshBackend

# name -> factory; each takes the keyword options of `k8sdds run` and uses those it knows
BACKENDS: dict[str, Callable[..., Backend]] = {"emulated": EmulatedBackend,
                                               "kubernetes": KubernetesBackend,
                                               "ssh": SshBackend}

__all__ = ["BACKENDS", "Backend", "Handle", "Placement"]
