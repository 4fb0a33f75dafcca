"""Fields that are also command-line options: a dataclass declares each option once (its
flag, help, bounds), and the CLI makes the `--flags` from it. A leaf."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field, fields
from pathlib import Path
from typing import Any


def option(default: Any, flag: str, help: str, *aliases: str, cli_type: type = str,
           parse: Callable[[Any], Any] | None = None, pins: bool = False,
           **bounds: float) -> Any:
    """A field that is also a command-line option: `flag` (and `aliases`) with `help`;
    `cli_type` is what the command line gives, `parse` turns it into the field's value;
    `pins`: the option names where a run ran, so a resume may not change it; `bounds`:
    min/max for numbers."""
    meta = {"flag": flag, "aliases": aliases, "help": help, "cli_type": cli_type,
            "parse": parse, "pins": pins, "bounds": bounds}
    return field(default=default, metadata=meta)


def build(cls: type, given: dict[str, Any]) -> Any:
    """An options object of `cls` from the values given (None: the field's default)."""
    values = {}
    for f in fields(cls):
        value = given.get(f.name)
        if value is None:
            continue
        parse = f.metadata.get("parse")
        values[f.name] = parse(value) if parse else value
    return cls(**values)


def pinned(cls: type) -> tuple[str, ...]:
    """The fields of `cls` that name where a run ran (a resume continues there)."""
    return tuple(f.name for f in fields(cls) if f.metadata.get("pins"))


def recorded(options: Any) -> dict[str, Any]:
    """What the user gave (what differs from the defaults), as JSON values."""
    out = {}
    for f in fields(options):
        value = getattr(options, f.name)
        if value != f.default:
            out[f.name] = str(value) if isinstance(value, Path) else (
                list(value) if isinstance(value, tuple) else value)
    return out
