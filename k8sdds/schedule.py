"""CSV schedule -> validated, frozen tests. All input checking lives here.

The K8sDDS columns (`dataLen,multicast,numSubscribers,bestEffort,batchSize`) are required;
every other column is optional and has a default. Command-line options apply to every row
that leaves the column empty or absent. Nothing runs until the whole schedule is valid.
"""

from __future__ import annotations

import csv
import difflib
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from k8sdds import capacity, model
from k8sdds.engines import Engine, registry
from k8sdds.errors import ScheduleError
from k8sdds.expansion import expand, expand_where_applicable  # noqa: F401 - the schedule's API
from k8sdds.model import (
    BESIDE,
    DISCOVERIES,
    PATHS,
    PLACEMENTS,
    SERVICE_PATHS,
    TOPOLOGIES,
    TRANSPORTS,
    Defaults,
    Limits,
    Test,
)

REQUIRED = ("dataLen", "multicast", "numSubscribers", "bestEffort", "batchSize")


class _Bad(ValueError):
    """A cell value that does not parse; the message says what is allowed."""


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    raise _Bad("true or false")


# the bounds of the numbers a run may also be given as options (`--duration`, `--repeats`;
# a service task's fields take the same)
BOUNDS = {"duration": (1, 86_400), "repeats": (1, 1000)}


def _number(cast: Callable[[str], Any], lo: int, hi: int) -> Callable[[str], Any]:
    """A parser for numbers of type `cast` (int or float) within lo..hi."""
    allowed = f"{'a whole number' if cast is int else 'a number'} from {lo} to {hi}"

    def parse(text: str) -> Any:
        try:
            value = cast(text.strip())
        except ValueError:
            raise _Bad(allowed) from None
        if not lo <= value <= hi:  # also refuses nan
            raise _Bad(allowed)
        return value
    return parse


def _choice(options: Sequence[str]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        low = text.strip().lower()
        if low in options:
            return low
        hint = difflib.get_close_matches(low, options, n=1)
        extra = f" (did you mean '{hint[0]}'?)" if hint else ""
        raise _Bad("one of " + ", ".join(options) + extra)
    return parse


def _load(text: str) -> str:
    value = capacity.canonical(text)
    if value is None:
        raise _Bad(capacity.ALLOWED)
    return value


# column name in the CSV -> (field of Test, parser)
COLUMNS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "dataLen": ("data_len", _number(int, 1, 2**31 - 1)),
    "multicast": ("multicast", _bool),
    "numSubscribers": ("num_subscribers", _number(int, 1, 10_000)),
    "bestEffort": ("best_effort", _bool),
    "batchSize": ("batch_size", _number(int, 0, 2**31 - 1)),
    "engine": ("engine", lambda t: t.strip().lower()),  # checked against the registry below
    "latencyTest": ("latency_test", _bool),
    "transport": ("transport", _choice(TRANSPORTS)),
    "secure": ("secure", _bool),
    "duration": ("duration", _number(float, *BOUNDS["duration"])),
    "repeats": ("repeats", _number(int, *BOUNDS["repeats"])),
    "datapath": ("datapath", _choice(tuple(model.DATAPATHS))),
    "placement": ("placement", _choice(PLACEMENTS)),
    "pubRate": ("pub_rate", _number(int, 0, 10**9)),
    "sendQueueSize": ("send_queue_size", _number(int, 0, 10**7)),
    "discovery": ("discovery", _choice(DISCOVERIES)),
    "path": ("path", _choice(PATHS)),
    "streams": ("streams", _number(int, 1, 128)),
    "topology": ("topology", _choice(TOPOLOGIES)),
    "mqttQos": ("mqtt_qos", _number(int, 0, 2)),
    "load": ("load", _load),
    "loadLen": ("load_len", _number(int, 1, 2**31 - 1)),
}
FIELD_TO_COLUMN = {f: c for c, (f, _) in COLUMNS.items()}


def _show(value: object, limit: int = 60) -> str:
    """A value for an error message: quoted, and cut when it is long."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(str(value))} characters)"


def _where(path: Path, line: int, row: int | None = None) -> str:
    return f"{path}, line {line}" + (f" (test row {row})" if row is not None else "")


def _decode(path: Path) -> str:
    from k8sdds.guarded import FileRefused, read_bytes

    try:
        raw = read_bytes(path, "schedule")
    except FileRefused as exc:
        raise ScheduleError(str(exc)) from None
    if b"\0" in raw:
        raise ScheduleError(f"{path}: not a CSV text file (it contains NUL bytes)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ScheduleError(
            f"{path}: not UTF-8 text (bad byte at offset {exc.start}); save the schedule as "
            "UTF-8 CSV") from None


def _header(path: Path, header: list[str]) -> list[str]:
    names = [h.strip() for h in header]
    seen: dict[str, int] = {}
    for pos, name in enumerate(names, start=1):
        if not name:
            raise ScheduleError(f"{path}, line 1, column {pos}: empty column name")
        if name in seen:
            raise ScheduleError(
                f"{path}, line 1: duplicate column '{name}' (columns {seen[name]} and {pos})")
        seen[name] = pos
        if name not in COLUMNS:
            hint = difflib.get_close_matches(name, list(COLUMNS), n=1, cutoff=0.5)
            extra = f"; did you mean '{hint[0]}'?" if hint else ""
            raise ScheduleError(
                f"{path}, line 1, column {pos}: unknown column {_show(name)}{extra} "
                f"Known columns: {', '.join(COLUMNS)}")
    missing = [c for c in REQUIRED if c not in seen]
    if missing:
        raise ScheduleError(
            f"{path}, line 1: missing required column(s) {', '.join(missing)}; a schedule "
            f"needs at least {','.join(REQUIRED)}")
    return names


def load(path: str | Path, defaults: Defaults = Defaults(), limits: Limits = Limits(),
         engines: Mapping[str, Engine] | None = None) -> list[Test]:
    """Read and validate a schedule file; raise ScheduleError naming the first problem.
    `engines`: the run's registry [one built from the environment]."""
    return loads(_decode(Path(path)), Path(path), defaults, limits, engines)


def loads(text: str, path: str | Path = "schedule", defaults: Defaults = Defaults(),
          limits: Limits = Limits(), engines: Mapping[str, Engine] | None = None,
          ) -> list[Test]:
    """Validate schedule CSV `text`; `path` names it in messages."""
    path = Path(path)
    engines = registry() if engines is None else engines
    try:  # newline="": old Mac line ends (a lone CR) split rows as the csv module expects
        rows = [r for r in csv.reader(io.StringIO(text, newline=""))]
    except csv.Error as exc:
        raise ScheduleError(f"{path}: not a readable CSV file ({exc})") from None
    # keep the file line of each row; skip rows that are entirely blank
    numbered = [(n, r) for n, r in enumerate(rows, start=1) if any(c.strip() for c in r)]
    if not numbered:
        raise ScheduleError(f"{path}: the schedule is empty; it needs a header line "
                            f"({','.join(REQUIRED)}) and at least one test row")
    _check_defaults(defaults)
    header_line, header = numbered[0]
    names = _header(path, header)
    body = numbered[1:]
    if not body:
        raise ScheduleError(f"{path}: the schedule has a header but no test rows")
    tests = []
    for row, (line, cells) in enumerate(body):
        if len(cells) != len(names):
            raise ScheduleError(
                f"{_where(path, line, row)}: {len(cells)} values for {len(names)} columns")
        tests.append(_row(path, line, row, dict(zip(names, cells, strict=False)), defaults,
                          limits, engines))
    return tests


def _check_defaults(defaults: Defaults) -> None:
    """Command-line values pass the same checks as the columns they stand for."""
    for f in fields(Defaults):
        value = getattr(defaults, f.name)
        column = FIELD_TO_COLUMN.get(f.name)
        if value is None or column is None:
            continue
        why = _refused(column, value)
        if why:
            raise ScheduleError(f"option --{column}: value {_cell(value)!r} is not allowed; "
                                f"allowed: {why}")


def _cell(value: Any) -> str:
    """A typed value as a schedule cell holds it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _refused(column: str, value: Any) -> str | None:
    """What `column` allows, when it does not allow `value`; None when it does."""
    try:
        COLUMNS[column][1](_cell(value))
    except _Bad as exc:
        return str(exc)
    return None


def _row(path: Path, line: int, row: int, cells: dict[str, str], defaults: Defaults,
         limits: Limits, engines: Mapping[str, Engine]) -> Test:
    values: dict[str, Any] = {}
    from_cli: set[str] = set()
    for fname in (f.name for f in fields(Defaults)):
        value = getattr(defaults, fname)
        if value is not None:
            values[fname] = value
            from_cli.add(fname)
    for column, text in cells.items():
        fname, parse = COLUMNS[column]
        if text.strip() == "":
            if column in REQUIRED:
                raise ScheduleError(
                    f"{_where(path, line, row)}, column '{column}': empty value; required")
            continue
        try:
            values[fname] = parse(text)
        except _Bad as exc:
            raise ScheduleError(
                f"{_where(path, line, row)}, column '{column}': value {_show(text.strip())} "
                f"is not allowed; allowed: {exc}") from None
        from_cli.discard(fname)
    if values.get("path") == "pod-pod-same-node":
        if "placement" in values and values["placement"] != "same-node":
            raise ScheduleError(f"{_where(path, line, row)}, column 'placement': value "
                                f"{values['placement']!r}: path pod-pod-same-node puts every "
                                "role on one node; leave placement empty or set same-node")
        values["placement"] = "same-node"
    elif values.get("path") and values.get("placement") == "same-node":
        raise ScheduleError(f"{_where(path, line, row)}, column 'placement': value "
                            f"'same-node': path {values['path']} crosses nodes; leave "
                            "placement empty or set cross-node")
    if values.get("load"):
        values.setdefault("load_len", capacity.LOAD_LEN)
    elif values.get("load_len"):
        raise ScheduleError(f"{_where(path, line, row)}, column 'loadLen': value "
                            f"{values['load_len']}: loadLen is the sample size of the stream "
                            "beside a round-trip test; set load too (a share of the path's "
                            "capacity, or max)")
    test = Test(row=row, line=line, **values)
    problem = check(test, limits, engines)
    if problem:
        fname, value, reason = problem
        column = FIELD_TO_COLUMN.get(fname, fname)
        source = (" (set on the command line)" if fname in from_cli else
                  "" if fname in values else " (the column's default: the row leaves it out)")
        raise ScheduleError(
            f"{_where(path, line, row)}, column '{column}': value {_show(value)}{source}: "
            f"{reason}")
    return test


def check_values(test: Test) -> tuple[str, Any, str] | None:
    """The column checks of a test's own values (a test read back from a manifest):
    (field, value, what is allowed), or None."""
    unset = {f.name: f.default for f in fields(Test)}
    for column, (fname, _) in COLUMNS.items():
        value = getattr(test, fname)
        why = None if value is None or value == unset.get(fname) else _refused(column, value)
        if why:
            return (fname, value, f"allowed: {why}")
    return None


def beyond_machine(test: Test, engine: Engine, limits: Limits) -> tuple[str, Any, str] | None:
    """Where the nodes `test` keeps busy at once have CPU budgets that add up to more than
    the machine they share: (field, value, reason); None where they fit. A node short of its
    budget shows figures lower than its board's, silently, so such a test is refused."""
    if not limits.node_cpus or not limits.machine_cpus:
        return None
    roles = [r for r in engine.roles(test) if r not in engine.hubs and r not in BESIDE]
    busy = 1 if test.placement == "same-node" else min(len(roles), len(limits.node_cpus))
    budgets = [cpu for cpu in limits.node_cpus[:busy] if cpu]
    if sum(budgets) <= limits.machine_cpus + 1e-9:
        return None
    holds = max(1, int(limits.machine_cpus / max(budgets) + 1e-9))
    return ("num_subscribers", test.num_subscribers,
            f"its roles keep {busy} nodes busy at once, whose CPU budgets add up to "
            f"{sum(budgets):.2f} CPUs, more than the {limits.machine_cpus} this machine has: "
            f"a node short of its budget would show figures lower than its board's. At "
            f"{max(budgets):g} CPU a node, this machine holds {holds} at once: fewer "
            "subscribers, placement=same-node, or a profile that needs less CPU (rpi3b runs "
            "this machine's programs at a fraction of one)")


def check(test: Test, limits: Limits, engines: Mapping[str, Engine]
          ) -> tuple[str, Any, str] | None:
    """The first reason this test cannot run: (field, value, reason), or None."""
    if test.engine not in engines:
        hint = difflib.get_close_matches(test.engine, list(engines), n=1)
        extra = f" (did you mean '{hint[0]}'?)" if hint else ""
        return ("engine", test.engine,
                "unknown engine; allowed: " + ", ".join(engines) + extra)
    built = engines[test.engine].arches
    lacking = {node: arch for node, arch in limits.arches.items() if built and arch not in built}
    if lacking:
        nodes = ", ".join(f"{node} ({arch})" for node, arch in sorted(lacking.items()))
        return ("engine", test.engine,
                f"{test.engine} is built for {', '.join(built)} only, and roles may land on "
                f"{nodes}: leave those nodes out (kubernetes: --arch; ssh: the inventory)")
    if test.engine in limits.unbuilt:
        return ("engine", test.engine, limits.unbuilt[test.engine])
    if test.num_subscribers > limits.max_subscribers:
        return ("num_subscribers", test.num_subscribers,
                f"more subscribers than this cluster can place (at most "
                f"{limits.max_subscribers})")
    if limits.no_multicast and (test.multicast or test.discovery == "multicast"):
        field_, value = ("multicast", test.multicast) if test.multicast else (
            "discovery", test.discovery)
        return (field_, value, f"this cluster cannot use multicast: {limits.no_multicast}")
    if limits.no_secure and test.secure:
        return ("secure", test.secure, f"DDS Security cannot run on this cluster: "
                f"{limits.no_secure}")
    engine = engines[test.engine]
    beyond = beyond_machine(test, engine, limits)
    if beyond:
        return beyond
    # what no engine does: the shared rules here, the engine's own below
    if test.latency_test and test.batch_size > 0:
        return ("batch_size", test.batch_size,
                "no engine allows batching in a latency test (latencyTest=true); set "
                "batchSize=0")
    if test.path and test.path not in limits.paths:
        return ("path", test.path,
                f"this backend offers the paths {', '.join(limits.paths)}; pod-service and "
                "external-nodeport go through a Service: --backend kubernetes")
    if test.path in SERVICE_PATHS and not engine.service_ports(test):
        return ("path", test.path,
                f"{test.engine} cannot go through a Service (it needs known ports a Service "
                "can forward); use iperf3 or ab on this path")
    if test.discovery == "cds" and "cds" not in engine.roles(test):
        return ("discovery", test.discovery,
                f"{test.engine} has no discovery service; cds (RTI Cloud Discovery Service) is "
                "for engine=rtiperftest")
    if test.topology and test.topology not in engine.topologies:
        runs = " or ".join(engine.topologies) or "client to server"
        return ("topology", test.topology,
                f"{test.engine} runs {runs}; topology=routed is for zenoh (through a Zenoh router) "
                "and mqtt (through its broker)")
    if test.mqtt_qos >= 0 and test.mqtt_qos not in engine.qos_levels:
        takes = [n for n, e in engines.items() if test.mqtt_qos in e.qos_levels]
        return ("mqtt_qos", test.mqtt_qos, f"mqttQos is MQTT's QoS: for engine="
                f"{' or '.join(takes)} only")
    if test.load and not test.latency_test:
        return ("load", test.load, "load is a stream beside a round-trip test; set "
                "latencyTest=true")
    if test.load and not engine.under_load:
        takes = [n for n, e in engines.items() if e.under_load]
        return ("load", test.load, f"{test.engine} runs no stream beside its round trip; "
                f"load is for engine={' or '.join(takes)}")
    if test.streams != 1 and not engine.parallel_streams:
        return ("streams", test.streams,
                f"{test.engine} runs one stream; streams is for iperf3 (-P) and ab (-c)")
    return engine.check(test)
