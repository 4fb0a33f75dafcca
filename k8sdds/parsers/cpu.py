"""What a repeat's processes and nodes used of the CPU, and what each message cost a role.

The runner writes `cpu.json` beside the logs where the backend can read it (the emulated
backend: each role's process as it is reaped, `deployment.reaping`; each placed node's
cgroup counter over the repeat, `testbed.cgroups.cpu_seconds`):

    {"roles": {"pub": {"user_s": 0.41, "system_s": 0.22}, ...},
     "nodes": {"node1": {"cpu_s": 0.7}, ...}}

A role's CPU per message (`cpu_per_message_us`) is its process's user and system seconds
over its whole life (on a kernel without IRQ time accounting, the softirq work done in its
context, sending and often receiving, is its system time) over the messages of its part of
the test, in µs:
- a round trip's two sides (a latency test's pub and its sub0): the round trips the pub
  counted; a message there is one ping and its pong;
- a receiver (sub0..subN-1 of pub, the sink of the stream beside a round trip): the samples
  it received;
- a sender (pub, the stream): the samples it wrote as its receivers saw them: the most any
  of them received and lost; once per sample whether it went once to a group or once to
  each subscriber.
A subscriber's `received` is its program's count over its life (ddsperf's `total`,
`tot_nrecv` in ddsperf.c, printed each second and read from its last line; Perftest's
`Packets`). The node's own threads (a userspace tunnel; on a node with a CPU budget also
threaded NAPI) are in the node's `node_cpu_s`, not in a role's. Pure."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace

from k8sdds.model import SINK, STREAM
from k8sdds.parsers.base import Parsed, Value

FILE = "cpu.json"
ROLE_METRICS = (("user_s", "cpu_user_s"), ("system_s", "cpu_system_s"))
NODE_METRIC = "node_cpu_s"
PER_MESSAGE = "cpu_per_message_us"
# a sender role -> its receivers' role prefix
RECEIVERS = {"pub": "sub", STREAM: SINK}
MAX_CPU_S = 1e7  # no repeat's process runs for 115 days


def _seconds(value: object) -> float | None:
    """A count of CPU seconds, or None for anything no counter can hold."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 <= value <= MAX_CPU_S else None


def parse(text: str) -> tuple[dict[str, tuple[Value, ...]], dict[str, tuple[Value, ...]]]:
    """cpu.json -> (each role's values, each node's values); a damaged file, or a value no
    counter holds, gives nothing for it: the measurement stands without it."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}, {}
    if not isinstance(data, dict):
        return {}, {}
    roles, nodes = {}, {}
    listed = {key: part if isinstance(part := data.get(key), dict) else {}
              for key in ("roles", "nodes")}
    for role, used in listed["roles"].items():
        if not isinstance(used, dict):
            continue
        values = tuple(Value(metric, s, "s") for key, metric in ROLE_METRICS
                       if (s := _seconds(used.get(key))) is not None)
        if len(values) == len(ROLE_METRICS):
            roles[str(role)] = values
    for node, used in listed["nodes"].items():
        s = _seconds(used.get("cpu_s")) if isinstance(used, dict) else None
        if s is not None:
            nodes[str(node)] = (Value(NODE_METRIC, s, "s"),)
    return roles, nodes


def _messages(role: str, parsed: Mapping[str, Parsed], round_trips: bool) -> float | None:
    """The messages of `role`'s part of the test (the module's definition), or None."""
    if round_trips and role not in (STREAM, SINK):
        return parsed["pub"].summary("roundtrips") if "pub" in parsed else None
    got = parsed[role].summary("received")
    if got is not None:
        return got
    prefix = RECEIVERS.get(role)
    if prefix is None:
        return None
    seen = [(p.summary("received") or 0.0) + (p.summary("lost") or 0.0)
            for r, p in parsed.items() if r.startswith(prefix) and r != role
            and p.summary("received") is not None]
    return max(seen) if seen else None


def per_message(parsed: Mapping[str, Parsed], cpu_roles: Mapping[str, tuple[Value, ...]],
                round_trips: bool) -> dict[str, Parsed]:
    """`parsed` (each role's parse) with each role's CPU values and its CPU per message
    added; `round_trips`: the test is a latency test (its pub and sub0 a round trip)."""
    out = dict(parsed)
    for role, values in cpu_roles.items():
        if role not in parsed:
            continue
        added = list(values)
        messages = _messages(role, parsed, round_trips)
        if messages:
            seconds = sum(v.value for v in values)
            added.append(Value(PER_MESSAGE, seconds / messages * 1e6, "us"))
        out[role] = replace(parsed[role], values=parsed[role].values + tuple(added))
    return out
