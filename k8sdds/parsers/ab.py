"""ApacheBench (`ab`) output -> HTTP requests per second, transfer rate, latency."""

from __future__ import annotations

import re

from k8sdds.parsers.base import Parsed, Value
from k8sdds.parsers.latency import Printed
from k8sdds.parsers.reader import Parser

# what ab's program prints as a latency, and where its source says so
PRINTED = Printed(
    "ab (Apache 2.4)",
    "the time per request: a request's send to its response's end",
    1.0, "support/ab.c", "(double) concurrency * timetaken * 1000 / done);")


RPS = re.compile(r"^Requests per second:\s+([0-9.]+)", re.M)
PER_REQUEST = re.compile(r"^Time per request:\s+([0-9.]+) \[ms\] \(mean\)$", re.M)
RATE = re.compile(r"^Transfer rate:\s+([0-9.]+) \[Kbytes/sec\]", re.M)
COUNT = re.compile(r"^(Complete requests|Failed requests|Non-2xx responses):\s+(\d+)", re.M)
PERCENT = re.compile(r"^\s+(50|90|99)%\s+(\d+)", re.M)


def parse(text: str, role: str, latency_test: bool) -> Parsed:
    if role != "client":
        return Parsed()
    rps = RPS.search(text)
    counts = {name: int(n) for name, n in COUNT.findall(text)}
    if not rps:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        why = next((ln for ln in reversed(lines) if ln.startswith(("apr_", "ab:"))),
                   lines[-1] if lines else "no output")
        return Parsed(failure=f"ab: {why[:200]}")
    if counts.get("Non-2xx responses"):
        return Parsed(failure=f"ab: {counts['Non-2xx responses']} of "
                              f"{counts.get('Complete requests', '?')} responses were not 2xx")
    values = [Value("requests_per_s", float(rps.group(1)), "requests/s")]
    per_request = PER_REQUEST.search(text)
    if per_request:
        values.append(Value("latency_us_mean", float(per_request.group(1)) * 1000, "us"))
    rate = RATE.search(text)
    if rate:
        values.append(Value("throughput_mbps", float(rate.group(1)) * 1024 * 8 / 1e6, "Mb/s"))
    if "Complete requests" in counts:
        values.append(Value("received", float(counts["Complete requests"]), "requests"))
    if "Failed requests" in counts:
        values.append(Value("failed", float(counts["Failed requests"]), "requests"))
    # ab prints whole milliseconds: coarse, but what it measured
    values += [Value(f"latency_us_p{q}", float(ms) * 1000, "us")
               for q, ms in PERCENT.findall(text)]
    return Parsed(values=tuple(values))


# what the engine that runs this program reads its logs with
PARSER = Parser("ab", parse, PRINTED)
