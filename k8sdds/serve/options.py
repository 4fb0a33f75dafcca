"""The options a task of `k8sdds serve` may set: those of `k8sdds run` (or `baseline`) and
every backend's own, each a field made from the same declaration as the CLI's flag (type,
bounds), and how a task asks for its run (the same RunRequest as the CLI's)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from k8sdds.errors import UserError
from k8sdds.flags import build
from k8sdds.order import ORDERS
from k8sdds.request import RunRequest, backend_values
from k8sdds.run_flags import KINDS, Matrix, ScheduleFlags

PATH = r"^/[^\x00\n]*$"
TEXT = r"^[A-Za-z0-9][A-Za-z0-9,._:/@+-]*$"  # names, lists of them, image references
CHOICES = {"order": tuple(ORDERS)}  # a field whose values are a closed list


def _fields(classes: list[type]) -> dict[str, Any]:
    """The fields of options dataclasses as task fields (the first declaration of a name
    wins: `run` and `baseline` share datapath, duration and repeats, with one set of
    bounds)."""
    out: dict[str, Any] = {}
    for cls in classes:
        for f in fields(cls):
            if f.name in out:
                continue
            meta, bounds = f.metadata, f.metadata["bounds"]
            numbers = {"ge": bounds.get("min"), "le": bounds.get("max")}
            out[f.name] = (Literal[CHOICES[f.name]] | None, None) if f.name in CHOICES else {
                Path: (str | None, Field(None, pattern=PATH, max_length=4096)),
                int: (int | None, Field(None, **numbers)),
                float: (float | None, Field(None, allow_inf_nan=False, **numbers)),
                bool: (bool | None, None),
            }.get(meta["cli_type"], (str | None, Field(None, pattern=TEXT, max_length=4096)))
    return out


def _backend_classes() -> list[type]:
    from k8sdds.deployment import BACKENDS

    return [kind.options for kind in BACKENDS.values()]


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def _group(self, cls: type) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(cls)}

    def check(self, kind: str) -> None:
        """Only the options of this kind of task (a baseline's on a schedule is refused)."""
        mine = {f.name for f in fields(KINDS[kind])}
        other = "baseline" if kind == "schedule" else "schedule"
        wrong = [f.name for f in fields(KINDS[other])
                 if f.name not in mine and getattr(self, f.name) is not None]
        if wrong:
            raise UserError(f"{', '.join(wrong)}: not an option of a {kind} task "
                            f"(`k8sdds {'run' if kind == 'schedule' else 'baseline'}` has "
                            "no such flag)")

    def target(self) -> str:
        """What a run occupies: one run at a time on it (the backend's options say)."""
        from k8sdds.deployment import options_of

        given = {k: getattr(self, k) for k in BACKEND_FIELDS}
        return options_of(self.backend, backend_values(given, "options")).target()

    def request(self, schedule: str, kind: str = "schedule") -> RunRequest:
        """The run this task asks for, as `k8sdds run` (or `baseline`) is asked: one request,
        checked the same way."""
        self.check(kind)
        given = backend_values({k: getattr(self, k) for k in BACKEND_FIELDS}, "options")
        if kind == "baseline":
            return RunRequest(matrix=build(Matrix, self._group(Matrix)), backend=self.backend,
                              backend_options=given)
        return RunRequest(schedule_text=schedule, schedule_name="schedule",
                          backend=self.backend, backend_options=given,
                          flags=build(ScheduleFlags, self._group(ScheduleFlags)))


def _backends() -> list[str]:
    from k8sdds.deployment import BACKENDS

    return list(BACKENDS)


RUN_FIELDS = _fields([ScheduleFlags, Matrix])
BACKEND_FIELDS = _fields(_backend_classes())
TaskOptions = create_model(
    "TaskOptions", __base__=_Options, __doc__="The run options a task may set: those of "
    "`k8sdds run` (and `baseline`) and every backend's own, as their flags take them; "
    "anything else is refused.",
    backend=(Literal[tuple(_backends())], "emulated"), **RUN_FIELDS, **BACKEND_FIELDS)
