"""iperf3 `-J` output of the client -> throughput, retransmits, jitter, loss, CPU.

The client's JSON holds both ends: `sum_sent` (this side) and `sum_received` (what the server
got), so the client's log is the measurement. iperf3 exits 0 even when it could not connect;
the `error` member says why.
"""

from __future__ import annotations

import json

import numpy as np

from k8sdds.parsers.base import Parsed, Trace, Value
from k8sdds.parsers.reader import Parser

MBPS = 1e6


def parse(text: str, role: str, latency_test: bool) -> Parsed:
    if role != "client":
        return Parsed()  # the server's output repeats what the client already has
    start = text.find("{")  # iperf3 may print warnings before its JSON document
    try:
        doc, _ = json.JSONDecoder().raw_decode(text, max(start, 0))
    except ValueError:
        first = text.strip().splitlines()[0][:200] if text.strip() else "no output"
        return Parsed(failure=f"iperf3 output is not complete JSON ({first})")
    if not isinstance(doc, dict):
        return Parsed(failure="iperf3 output is not an iperf3 JSON document")
    if doc.get("error"):
        return Parsed(failure=f"iperf3: {doc['error']}")
    end = doc.get("end") or {}
    received, sent = end.get("sum_received") or {}, end.get("sum_sent") or {}
    if not received.get("bits_per_second") and not sent.get("bits_per_second"):
        return Parsed(failure="iperf3 reported no transfer")
    values = [Value("throughput_mbps", _num(received.get("bits_per_second")) / MBPS, "Mb/s"),
              Value("throughput_sent_mbps", _num(sent.get("bits_per_second")) / MBPS, "Mb/s")]
    if "retransmits" in sent:
        values.append(Value("retransmits", _num(sent["retransmits"]), "count"))
    if "jitter_ms" in received and received.get("packets"):
        values += [Value("jitter_ms", _num(received["jitter_ms"]), "ms"),
                   Value("lost", _num(received.get("lost_packets")), "samples"),
                   Value("received", _num(received["packets"]) -
                         _num(received.get("lost_packets")), "samples")]
    cpu = end.get("cpu_utilization_percent") or {}
    if "host_total" in cpu:
        values.append(Value("cpu_pct", _num(cpu["host_total"]), "%"))
    if "remote_total" in cpu:
        values.append(Value("cpu_remote_pct", _num(cpu["remote_total"]), "%"))
    t, rate = [], []
    for interval in doc.get("intervals") or []:
        s = interval.get("sum") or {}
        if "end" in s and "bits_per_second" in s:
            t.append(_num(s["end"]))
            rate.append(_num(s["bits_per_second"]) / MBPS)
    columns = (Trace("throughput_mbps", "Mb/s", np.array(t), np.array(rate)),) if t else ()
    return Parsed(values=tuple(values), columns=columns)


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


# what the engine that runs this program reads its logs with
PARSER = Parser("iperf3", parse)
