"""Backends by name. The runner never branches on a backend; it looks it up here."""

from __future__ import annotations

from collections.abc import Callable

from k8sdds.deployment.base import Backend, Handle, Placement
from k8sdds.deployment.emulated import EmulatedBackend

BACKENDS: dict[str, Callable[[], Backend]] = {"emulated": EmulatedBackend}

__all__ = ["BACKENDS", "Backend", "Handle", "Placement"]
