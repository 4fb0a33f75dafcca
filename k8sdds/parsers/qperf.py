"""qperf client output -> throughput or latency (and CPU with -v).

qperf prints `TEST:` then `name = value unit` lines. Its latency is half the round trip (the
time over the messages both ends received, `PRINTED`); it is recorded as a round trip,
as every engine's is.
"""

from __future__ import annotations

import re

from k8sdds.parsers.base import Parsed, Value
from k8sdds.parsers.latency import Printed
from k8sdds.parsers.reader import Parser

# what qperf's program prints as a latency, and where its source says so
PRINTED = Printed(
    "qperf 0.4.11",
    "half the round trip: the time over the messages both ends received",
    2.0, "src/qperf.c", "Res.latency = Res.l.time_real / no_msgs;")


LINE = re.compile(r"^\s+(\w+)\s+=\s+([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S+)", re.M)
BYTES = {"bytes/sec": 1, "KB/sec": 1e3, "MB/sec": 1e6, "GB/sec": 1e9, "TB/sec": 1e12}
SECONDS = {"ns": 1e-3, "us": 1, "ms": 1e3, "sec": 1e6}


def parse(text: str, role: str, latency_test: bool) -> Parsed:
    if role != "client":
        return Parsed()
    failed = re.search(r"^(?:\S+: )?(failed to .*|.*error.*)$", text, re.M | re.I)
    fields = {name: (float(num), unit) for name, num, unit in LINE.findall(text)}
    values = []
    for name in ("bw", "recv_bw"):
        if name in fields and fields[name][1] in BYTES:
            num, unit = fields[name]
            values.append(Value("throughput_mbps", num * BYTES[unit] * 8 / 1e6, "Mb/s"))
            break
    if "send_bw" in fields and fields["send_bw"][1] in BYTES:
        num, unit = fields["send_bw"]
        values.append(Value("throughput_sent_mbps", num * BYTES[unit] * 8 / 1e6, "Mb/s"))
    if "latency" in fields and fields["latency"][1] in SECONDS:
        num, unit = fields["latency"]
        values.append(Value("latency_us_mean",
                            PRINTED.factor * num * SECONDS[unit], "us"))
    if "msg_rate" in fields:
        num, unit = fields["msg_rate"]
        scale = {"K/sec": 1e3, "M/sec": 1e6, "/sec": 1}.get(unit, 1)
        values.append(Value("samples_per_s", num * scale, "samples/s"))
    for name in ("loc_cpus_used", "send_cpus_used"):
        if name in fields:
            values.append(Value("cpu_pct", fields[name][0], "%"))
            break
    for name in ("rem_cpus_used", "recv_cpus_used"):
        if name in fields:
            values.append(Value("cpu_remote_pct", fields[name][0], "%"))
            break
    measured = [v for v in values if v.metric in ("throughput_mbps", "latency_us_mean")]
    if not measured:
        why = failed.group(1).strip() if failed else "no result line"
        return Parsed(failure=f"qperf: {why}")
    return Parsed(values=tuple(values))


# what the engine that runs this program reads its logs with
PARSER = Parser("qperf", parse, PRINTED)
