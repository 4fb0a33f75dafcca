"""A repeat's raw logs -> tidy result rows; used by the runner and by `k8sdds parse`."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from k8sdds.guarded import read_bytes, text_pieces
from k8sdds.model import BESIDE, Test
from k8sdds.parsers import Parsed, Value, counters, cpu
from k8sdds.parsers.base import MAX_SAMPLES, thinning_step
from k8sdds.parsers.latency import definition
from k8sdds.parsers.reader import Parser
from k8sdds.results.schema import test_values

USAGE = "usage.json"  # what the datapath consumed during a repeat (written by the runner)
DATAPATH = "datapath"  # the pseudo role its figures are recorded under
NODE = f"{counters.ROLE}:"  # a node's sampled counters: key NODE + its name, role `node`


def measures_round_trips(test: Test, role: str) -> bool:
    """Whether `role`'s log holds round trips: a latency test's, but for the stream beside
    it (`load`), a throughput pair."""
    return test.latency_test and role not in BESIDE


def parse_logs(test: Test, rep_dir: Path, roles: Sequence[str], parser: Parser,
               advance: Callable[[int], None] | None = None) -> dict[str, Parsed]:
    """Parse each role's log of one repeat with `parser` (the engine's; a missing log parses
    as a failure), and each node's sampled counters (counters-NODE.log, under `NODE` +
    its name); what each role's process and each node used of the CPU (parsers.cpu);
    `advance(n)`: n more bytes of a log read (a progress bar's)."""
    parse, stream = parser.parse, parser.stream
    out = {}
    for role in roles:
        log = rep_dir / f"{role}.log"
        if not os.path.lexists(log):
            out[role] = Parsed(failure=f"no log {log.name}")
            continue
        # never through a link, never a FIFO; engines may print bytes that are not UTF-8
        if stream is not None:  # a piece at a time: a long log is never held whole
            reading = stream(role, measures_round_trips(test, role))
            for piece in text_pieces(log, "log", follow=False, advance=advance):
                reading.feed(piece)
            out[role] = reading.result()
            continue
        data = read_bytes(log, "log", follow=False)
        if advance is not None:
            advance(len(data))
        out[role] = parse(data.decode("utf-8", errors="replace"), role,
                          measures_round_trips(test, role))
    for log in sorted(rep_dir.glob(f"{counters.PREFIX}*.log")):
        node = log.name[len(counters.PREFIX):-len(".log")]
        data = read_bytes(log, "log", follow=False)
        out[NODE + node] = counters.parse(data.decode("utf-8", errors="replace"))
    used = rep_dir / cpu.FILE
    if os.path.lexists(used):
        roles_cpu, nodes_cpu = cpu.parse(read_bytes(used, "cpu", follow=False)
                                         .decode("utf-8", errors="replace"))
        out = cpu.per_message(out, roles_cpu, test.latency_test)
        for node, values in nodes_cpu.items():
            had = out.get(NODE + node, Parsed())
            out[NODE + node] = replace(had, values=had.values + values)
    usage = rep_dir / USAGE
    if os.path.lexists(usage):
        out[DATAPATH] = datapath_usage(read_bytes(usage, "usage", follow=False)
                                       .decode("utf-8", errors="replace"))
    return out


def datapath_usage(text: str) -> Parsed:
    """usage.json -> CPU of the datapath's own processes and softirq, in % of one core."""
    try:
        usage = json.loads(text)
        wall = float(usage["wall_s"])
    except (ValueError, KeyError, TypeError):
        return Parsed()  # damaged: the measurement stands without it
    if wall <= 0:
        return Parsed()
    names = {"datapath_cpu_s": "datapath_cpu_pct", "softirq_s": "softirq_pct",
             "node_cpu_s": "node_cpu_pct"}
    values = [Value(metric, max(0.0, float(usage[key])) / wall * 100, "%")
              for key, metric in names.items() if isinstance(usage.get(key), (int, float))]
    for key, unit in (("datapath_memory_mb", "MiB"), ("node_load1", "load")):
        if isinstance(usage.get(key), (int, float)):
            values.append(Value(key, float(usage[key]), unit))
    return Parsed(values=tuple(values))


def node_arches(cluster: Mapping[str, Any]) -> dict[str, str]:
    """Each node's architecture, from a manifest's cluster description: its `nodes` (the
    kubernetes and emulated backends) or its `hosts` (the ssh backend's bare hosts)."""
    listed = [*cluster.get("nodes", []), *cluster.get("hosts", [])]
    return {str(n.get("name", "")): str(n.get("arch") or "")
            for n in listed if isinstance(n, Mapping)}


# a CPU share no machine of a study has: 100 % is one core, and no node has 1,024
MAX_CPU_PCT = 100 * 1024


def impossible(metric: str, value: float, unit: str, t: float | None = None) -> str | None:
    """Why no measurement can have this value (None: it can): not a finite number, a
    negative count, rate, time or share, a percentage of loss over 100, a CPU share over
    what a machine has."""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "not a finite number"
    if t is not None and not (math.isfinite(t) and t >= 0):
        return f"at time {t!r}, not a time into the repeat"
    if value < 0:
        return "negative: no count, rate, time or share is"
    if unit == "%" and "lost" in metric and value > 100:
        return "a loss over 100 %"
    if unit == "%" and "cpu" in metric and value > MAX_CPU_PCT:
        return f"a CPU share over {MAX_CPU_PCT} % (1,024 cores)"
    return None


def thinned(result: Parsed, said: list[str] | None = None, role: str = "") -> Parsed:
    """`result` with each column of samples cut to at most MAX_SAMPLES, every k-th kept
    (`thinning_step`; a parser that read a long log a piece at a time has done it already),
    said in `said` with how many there were."""
    columns = []
    for col in result.columns:
        n = max(col.seen, len(col.values))
        step = thinning_step(n)
        if step == 1:
            columns.append(col)
            continue
        if len(col.values) == n:  # not thinned as it was read
            col = col._replace(t=col.t[::step], values=col.values[::step])
        columns.append(col)
        if said is not None:
            said.append(f"{role}.log: {col.metric}: {n:,} interval samples, one in {step:,} "
                        f"kept (at most {MAX_SAMPLES:,}; the summaries are of all)")
    return replace(result, columns=tuple(columns))


def rows(run_id: str, backend: str, test: Test, repeat: int, nodes: Mapping[str, str],
         parsed: Mapping[str, Parsed], arches: Mapping[str, str] | None = None,
         dropped: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per measured value, the columns of results/schema.py; `nodes` maps a role to
    its node, `arches` a node to its architecture (a hybrid cluster's rows say which). A
    value no measurement can have (`impossible`) is never a row: it is said in `dropped`;
    a role's samples of one metric are at most MAX_SAMPLES (`thinned`, said there too)."""
    arches = arches or {}
    base = {"run_id": run_id, "test": test.number, "repeat": repeat, "backend": backend,
            **test_values(test)}
    out = []
    for key, result in parsed.items():
        # a node's counters name their node; a role's node is where it was placed
        role, node = ((counters.ROLE, key[len(NODE):]) if key.startswith(NODE)
                      else (key, nodes.get(key, "")))
        if role == counters.ROLE and node not in nodes.values():
            if dropped is not None:  # a file's name is no evidence of a node
                dropped.append(f"{counters.PREFIX}{node[:40]}.log: no role of the repeat ran "
                               "on such a node; left out")
            continue
        for v in thinned(result, dropped, role).all_values():
            why = impossible(v.metric, v.value, v.unit, v.t)
            if why:
                if dropped is not None:
                    at = "" if v.t is None else f" at {v.t:g} s"
                    dropped.append(f"{role}.log: {v.metric} {v.value!r}{at}: {why}; left out")
                continue
            out.append({**base, "role": role, "node": node, "kind": v.kind,
                        "t": v.t, "metric": v.metric, "value": v.value, "unit": v.unit,
                        "arch": arches.get(node, ""), "definition": definition(v.metric)})
    return out
