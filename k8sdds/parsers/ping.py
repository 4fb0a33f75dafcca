"""ping (iputils) output -> round-trip percentiles from every reply, and loss."""

from __future__ import annotations

import re

import numpy as np

from k8sdds.parsers.base import Parsed, Trace, Value
from k8sdds.parsers.latency import Printed
from k8sdds.parsers.reader import Parser

# what ping's program prints as a latency, and where its source says so
PRINTED = Printed(
    "ping (iputils 20221126)",
    "the round trip of each echo",
    1.0, "ping/ping_common.c", "triptime = tv->tv_sec * 1000000 + tv->tv_usec;")


REPLY = re.compile(r"icmp_seq=(\d+) .*?time[=<]([0-9.]+) ms")
STATS = re.compile(r"(\d+) packets transmitted, (\d+) received")
QUANTILES = (("p50", 50), ("p90", 90), ("p99", 99))


def parse(text: str, role: str, latency_test: bool) -> Parsed:
    if role != "client":
        return Parsed()
    seqs, times = [], []
    for m in REPLY.finditer(text):
        seqs.append(int(m.group(1)))
        times.append(float(m.group(2)) * 1000.0)
    stats = STATS.search(text)
    if not times:
        error = re.search(r"^ping: (.+)$", text, re.M)
        if error:
            return Parsed(failure=f"ping: {error.group(1).strip()}")
        if stats:
            return Parsed(failure=f"no reply: {stats.group(1)} packets transmitted, "
                                  f"{stats.group(2)} received")
        return Parsed(failure="no reply line")
    rtt = np.array(times)
    values = [Value("latency_us_mean", float(rtt.mean()), "us"),
              Value("latency_us_min", float(rtt.min()), "us"),
              Value("latency_us_max", float(rtt.max()), "us"),
              Value("roundtrips", float(len(rtt)), "count")]
    values += [Value(f"latency_us_{name}", float(np.percentile(rtt, q)), "us")
               for name, q in QUANTILES]
    if stats:
        values.append(Value("lost", float(int(stats.group(1)) - int(stats.group(2))),
                            "samples"))
    return Parsed(values=tuple(values),
                  columns=(Trace("rtt_us", "us", np.array(seqs, dtype=float), rtt),))


# what the engine that runs this program reads its logs with
PARSER = Parser("ping", parse, PRINTED)
