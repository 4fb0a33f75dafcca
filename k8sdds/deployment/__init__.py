"""Backends by name. The runner never branches on a backend; it looks it up here."""

from __future__ import annotations

from collections.abc import Callable

from k8sdds.deployment.base import Backend, Handle, Placement
from k8sdds.deployment.emulated import EmulatedBackend

# name -> factory; each factory takes the keyword options of `k8sdds run` it understands
BACKENDS: dict[str, Callable[..., Backend]] = {"emulated": EmulatedBackend}

__all__ = ["BACKENDS", "Backend", "Handle", "Placement"]
