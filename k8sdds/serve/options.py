"""The options a task of `k8sdds serve` may set: those of `k8sdds run` (and `baseline`) and
every backend's own, as their flags take them (each a field with the CLI's bounds), how a task
asks for its run (the same RunRequest as the CLI's), and the child's argv (no shell, no
option injection)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from k8sdds import model
from k8sdds.errors import UserError
from k8sdds.order import ORDERS
from k8sdds.request import Matrix, RunRequest
from k8sdds.schedule import BOUNDS  # the CLI's bounds, one set

NAME = r"^[A-Za-z0-9][A-Za-z0-9,._-]*$"  # never an option: no leading '-'
PATH = r"^/[^\x00\n]*$"
TEXT = r"^[A-Za-z0-9][A-Za-z0-9,._:/@+-]*$"  # names, lists of them, image references
# the options of `k8sdds run` (and `baseline`) a task may set besides the backend's own
RUN_OPTIONS: dict[str, Any] = {
    "datapath": (str | None, Field(None, pattern=NAME, max_length=256)),
    "transport": (str | None, Field(None, pattern=NAME, max_length=64)),
    "repeats": (int | None, Field(None, ge=BOUNDS["repeats"][0], le=BOUNDS["repeats"][1])),
    "duration": (float | None, Field(None, ge=BOUNDS["duration"][0],
                                     le=BOUNDS["duration"][1])),
    "order": (Literal[tuple(ORDERS)] | None, None),  # `k8sdds run --order`
    # a baseline's own (`k8sdds baseline`): a network test between two named nodes is
    # engines=iperf3 (or ping, qperf), one path, pub_node and sub_nodes
    "engines": (str | None, Field(None, pattern=NAME, max_length=64)),
    "paths": (str | None, Field(None, pattern=NAME, max_length=256)),
    "dds": (bool | None, None),
}
BASELINE_ONLY = ("engines", "paths", "dds")
SCHEDULE_ONLY = ("transport", "order")


def _backend_options() -> tuple[dict[str, Any], dict[str, str]]:
    """Every backend's options as task fields, from deployment/options.py as the CLI's flags
    are (type, bounds), and each one's flag."""
    from dataclasses import fields

    from k8sdds.deployment import BACKENDS

    out, flags = {}, {}
    for kind in BACKENDS.values():
        for f in fields(kind.options):
            meta, bounds = f.metadata, f.metadata["bounds"]
            numbers = {"ge": bounds.get("min"), "le": bounds.get("max")}
            out[f.name] = {
                Path: (str | None, Field(None, pattern=PATH, max_length=4096)),
                int: (int | None, Field(None, **numbers)),
                float: (float | None, Field(None, **numbers)),
                bool: (bool | None, None),
            }.get(meta["cli_type"], (str | None, Field(None, pattern=TEXT, max_length=4096)))
            flags[f.name] = meta["flag"]
    return out, flags


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def argv(self, kind: str) -> list[str]:
        """`k8sdds run` (or `baseline`) options, each as one `--name=value` word (no shell,
        no option injection)."""
        others = {"schedule": BASELINE_ONLY, "baseline": SCHEDULE_ONLY}[kind]
        wrong = [n for n in others if getattr(self, n) is not None]
        if wrong:
            raise UserError(f"{', '.join(wrong)}: not an option of a {kind} task "
                            f"(`k8sdds {'run' if kind == 'schedule' else 'baseline'}` has "
                            "no such flag)")
        out = [f"--backend={self.backend}"]
        for name, value in self.model_dump(exclude={"backend"}).items():
            flag = FLAGS.get(name, "--" + name.replace("_", "-"))
            if name in FLAGS and isinstance(value, bool):  # a backend's flag: given or not
                out += [flag] if value else []
            elif value is True or value is False:
                out.append(flag if value else f"--no-{name}")
            elif value is not None:
                out.append(f"{flag}={value}")
        return out

    def target(self) -> str:
        """What a run occupies: one run at a time on it."""
        if self.backend == "kubernetes":
            return f"kubernetes:{self.kubeconfig or '~/.kube/config'}:{self.context or ''}"
        if self.backend == "ssh":
            return f"ssh:{self.inventory}"
        return f"emulated:{self.testbed or 'k8sdds'}"

    def request(self, schedule: str, kind: str = "schedule") -> RunRequest:
        """The run this task asks for, as `k8sdds run` (or `baseline`) is asked: one request,
        checked the same way."""
        dumped = self.model_dump()
        given = {k: v for k, v in dumped.items() if k in FLAGS}
        if kind == "baseline":
            m = Matrix()
            matrix = Matrix(paths=self.paths or m.paths, engines=self.engines or m.engines,
                            dds=m.dds if self.dds is None else self.dds,
                            duration=self.duration or m.duration)
            return RunRequest(matrix=matrix, backend=self.backend, backend_options=given,
                              datapath=self.datapath,
                              defaults=model.Defaults(repeats=self.repeats))
        return RunRequest(
            schedule_text=schedule, schedule_name="schedule", backend=self.backend,
            backend_options=given, datapath=self.datapath, transport=self.transport,
            order=self.order, defaults=model.Defaults(duration=self.duration,
                                                      repeats=self.repeats))


def _backends() -> list[str]:
    from k8sdds.deployment import BACKENDS

    return list(BACKENDS)


BACKEND_OPTIONS, FLAGS = _backend_options()
TaskOptions = create_model(
    "TaskOptions", __base__=_Options, __doc__="The run options a task may set: those of "
    "`k8sdds run` (and `baseline`) and every backend's own, as their flags take them; "
    "anything else is refused.",
    backend=(Literal[tuple(_backends())], "emulated"), **RUN_OPTIONS, **BACKEND_OPTIONS)
