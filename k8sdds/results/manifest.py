"""manifest.json, typed: what a run was (tests, backend, cluster, environment) and what became
of each repeat. The only place that knows its format, its schema version and how to read every
earlier version (asv-style upgrade steps, one per version)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

from k8sdds import __version__
from k8sdds.model import Test
from k8sdds.order import BEFORE, ORDERS
from k8sdds.order import DEFAULT as DEFAULT_ORDER

# 1: the first format. 2: `backend_options`, what the run's backend was given (so --resume
# uses the same testbed, namespace or inventory). 3: the fingerprints' CPU count named
# `cpu_count`, as `environment` names it (2 said `cpus`).
SCHEMA_VERSION = 3
STATUSES = ("running", "complete", "interrupted", "stopped")
REPEAT_STATUSES = ("done", "failed")
_KEY = re.compile(r"^test-(\d{1,9})/rep-(\d{1,9})$")


class ManifestError(ValueError):
    """The manifest does not have the shape of any version; says which field and why."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True, order=True)
class RepeatKey:
    """Which repeat: `test-N/rep-R`, also the repeat's directory in the run directory."""

    test: int
    repeat: int

    def __str__(self) -> str:
        return f"test-{self.test}/rep-{self.repeat}"

    @classmethod
    def parse(cls, text: str) -> RepeatKey:
        m = _KEY.match(str(text))
        if not m:
            raise ManifestError(f"repeat key {str(text)[:60]!r} is not test-N/rep-R")
        return cls(int(m[1]), int(m[2]))


@dataclass
class RepeatEntry:
    """What became of one repeat."""

    status: str  # done | failed
    reason: str | None = None
    started: str | None = None
    placement: dict[str, str] = field(default_factory=dict)  # role -> node
    discovery: str | None = None
    argv: dict[str, list[str]] = field(default_factory=dict)
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    wall_s: float | None = None
    source: str | None = None  # imported: the folder the logs came from
    # what of the logs is not a row: values no measurement can have, samples thinned
    # (records.rows's `dropped`: log, metric, value, why)
    dropped: list[str] = field(default_factory=list)
    # the stream beside its round trip (`load`): its rate a second, and the capacity it is
    # a share of (capacity.Stream.record)
    stream: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {"status": self.status, "reason": self.reason, "placement": self.placement}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name not in out and value not in (None, {}, []):
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> RepeatEntry:
        _mapping(data, where)
        known = {f.name for f in fields(cls)}
        if data.get("status") not in REPEAT_STATUSES:
            raise ManifestError(f"{where}: status {data.get('status')!r} is not one of "
                                f"{', '.join(REPEAT_STATUSES)}")
        for name in ("placement", "argv", "exit_codes", "stream"):
            if name in data and not isinstance(data[name], dict):
                raise ManifestError(f"{where}: {name} is not an object")
        for name in ("reason", "started", "discovery", "source"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise ManifestError(f"{where}: {name} is not text")
        if not isinstance(data.get("dropped", []), list) or not all(
                isinstance(line, str) for line in data.get("dropped", [])):
            raise ManifestError(f"{where}: dropped is not a list of text")
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class RunManifest:
    """One run: written when it starts, rewritten (atomically) after every repeat."""

    run_id: str
    backend: str
    tests: list[Test]
    status: str = "running"
    created: str = field(default_factory=now)
    k8sdds: str = __version__
    command_line: list[str] = field(default_factory=list)
    schedule: dict | None = None  # path, copy, sha256
    backend_options: dict[str, Any] = field(default_factory=dict)
    cluster: dict[str, Any] = field(default_factory=dict)  # what the backend offered
    datapaths: list[str] = field(default_factory=list)
    # rows a datapath of the run could not carry, left out there: row, line, datapath,
    # column, value, reason (expansion.NotApplicable)
    not_applicable: list[dict] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, str] = field(default_factory=dict)
    # per datapath, per node: what decides a network figure besides the test (k8sdds.
    # fingerprint), taken at the datapath's first repeat
    fingerprints: dict[str, Any] = field(default_factory=dict)
    repeats: dict[RepeatKey, RepeatEntry] = field(default_factory=dict)
    resumed: list[dict] = field(default_factory=list)
    finished: str | None = None
    imported: dict | None = None  # `k8sdds import`: where the data came from
    order: str = DEFAULT_ORDER  # the order its repeats run in (k8sdds.order.ORDERS)
    schema_version: int = SCHEMA_VERSION

    def test(self, number: int) -> Test:
        for t in self.tests:
            if t.number == number:
                return t
        raise ManifestError(f"repeat of test {number}, which the manifest does not list")

    def pending(self) -> Iterator[tuple[Test, list[int]]]:
        """Each test and its repeats without an entry (all of them in a new run)."""
        for t in self.tests:
            yield t, [r for r in range(1, t.repeats + 1) if RepeatKey(t.number, r)
                      not in self.repeats]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema_version": self.schema_version}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "tests":
                value = [encode_test(t) for t in value]
            elif f.name == "repeats":
                value = {str(k): e.to_dict() for k, e in sorted(value.items())}
            elif f.name in ("resumed", "finished", "imported", "not_applicable",
                            "fingerprints") and not value:
                continue
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: Any) -> RunManifest:
        """A manifest of any version, upgraded to this one; ManifestError names the field."""
        data = upgrade(data)
        for name in ("run_id", "backend"):
            if not isinstance(data.get(name), str):
                raise ManifestError(f"{name} is missing or not text")
        data = {"order": BEFORE, **data}  # a run older than --order ran test by test
        if data["order"] not in ORDERS:
            raise ManifestError(f"order {str(data.get('order'))[:40]!r} is not one of "
                                f"{', '.join(ORDERS)}")
        if data.get("status", "running") not in STATUSES:
            raise ManifestError(f"status {data.get('status')!r} is not one of "
                                f"{', '.join(STATUSES)}")
        for name, kind in (("command_line", list), ("backend_options", dict),
                           ("cluster", dict), ("datapaths", list), ("environment", dict),
                           ("tools", dict), ("resumed", list), ("not_applicable", list),
                           ("fingerprints", dict)):
            if name in data and not isinstance(data[name], kind):
                raise ManifestError(f"{name} is not {'a list' if kind is list else 'an object'}")
        for i, left in enumerate(data.get("not_applicable") or []):
            _mapping(left, f"not_applicable[{i}]")
            for name, kind in (("row", int), ("line", int), ("datapath", str), ("column", str),
                               ("value", str), ("reason", str)):
                if not isinstance(left.get(name), kind) or isinstance(left.get(name), bool):
                    raise ManifestError(f"not_applicable[{i}]: {name} is missing or not "
                                        f"{'a whole number' if kind is int else 'text'}")
        tests = data.get("tests")
        if not isinstance(tests, list):
            raise ManifestError("tests is missing or not a list")
        built = [decode_test(t, f"tests[{i}]") for i, t in enumerate(tests)]
        repeats = _mapping(data.get("repeats", {}), "repeats")
        entries = {RepeatKey.parse(k): RepeatEntry.from_dict(v, f"repeats[{k!r}]")
                   for k, v in repeats.items()}
        numbers = {t.number for t in built}
        for key in entries:
            if key.test not in numbers:
                raise ManifestError(f"repeats[{str(key)!r}]: no test {key.test} in tests")
        known = {f.name for f in fields(cls)} - {"tests", "repeats"}
        return cls(tests=built, repeats=entries,
                   **{k: v for k, v in data.items() if k in known})


# ---- tests, as the manifest holds them -------------------------------------------------

_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,),
                                       "str": (str,), "None": (type(None),)}


def encode_test(test: Test) -> dict[str, Any]:
    return {f.name: getattr(test, f.name) for f in fields(Test)}


def decode_test(data: Any, where: str) -> Test:
    """A Test from its manifest form, each field checked against its type."""
    _mapping(data, where)
    known = {f.name: f for f in fields(Test)}
    unknown = sorted(set(data) - set(known), key=str)
    if unknown:
        raise ManifestError(f"{where}: unknown field(s) {', '.join(map(str, unknown))}")
    for name, f in known.items():
        if name not in data:
            if f.default is f.default_factory:  # both MISSING: a field without a default
                raise ManifestError(f"{where}: field {name} is missing")
            continue
        allowed = tuple(t for part in str(f.type).split("|") for t in _TYPES[part.strip()])
        value = data[name]
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise ManifestError(f"{where}: field {name} = {str(value)[:60]!r} is not "
                                f"{str(f.type)}")
    return Test(**data)


def _mapping(data: Any, where: str) -> Mapping:
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: not an object")
    return data


# ---- upgrades: version N -> N + 1, applied in turn ------------------------------------

def _v1_to_v2(data: dict) -> dict:
    """Version 1 did not record the backend's options; the emulated testbed's name is in
    `cluster`, the other backends' options were not kept (resume takes them anew)."""
    options = {}
    if data.get("backend") == "emulated" and isinstance(data.get("cluster"), dict) \
            and isinstance(data["cluster"].get("testbed"), str):
        options["testbed"] = data["cluster"]["testbed"]
    return {**data, "backend_options": options, "schema_version": 2}


def _v2_to_v3(data: dict) -> dict:
    """Version 2's node fingerprints named the CPU count `cpus`; since version 3 it is
    `cpu_count`, as the run's `environment` names it."""
    def renamed(fp: Any) -> Any:
        return {("cpu_count" if k == "cpus" else k): v for k, v in fp.items()} \
            if isinstance(fp, dict) else fp

    prints = data.get("fingerprints")
    if isinstance(prints, dict):
        data = {**data, "fingerprints": {
            datapath: {node: renamed(fp) for node, fp in nodes.items()}
            if isinstance(nodes, dict) else nodes for datapath, nodes in prints.items()}}
    return {**data, "schema_version": 3}


UPGRADES: dict[int, Callable[[dict], dict]] = {1: _v1_to_v2, 2: _v2_to_v3}


def upgrade(data: Any) -> dict:
    """`data` of any known version, as the current version."""
    _mapping(data, "the manifest")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ManifestError(f"schema_version {str(version)[:20]!r} is not a version number")
    if version > SCHEMA_VERSION:
        raise ManifestError(f"schema_version {version} is newer than this k8sdds "
                            f"({__version__}) reads (1 to {SCHEMA_VERSION}); upgrade k8sdds")
    while version < SCHEMA_VERSION:
        data = UPGRADES[version](data)
        version = data["schema_version"]
    return data

