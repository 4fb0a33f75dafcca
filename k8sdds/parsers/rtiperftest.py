"""RTI Perftest output -> values; one parser for every format, chosen by content.

Formats: the legacy lines of 3.x (`Length: ... Packets/s(ave) ... Mbps(ave) ... Lost ... CPU`,
`Length: ... Latency: Ave ... 99.9999% ... CPU`, interval lines `Packets: ... Packets/s: ...`
and `One way Latency: ...`, 4.0 `One-Way Latency:`), the CSV summaries of 3.x
(`Throughput Summary:` / `One-way Latency Summary:` + header + rows, with or without CPU and
serialization columns), the CSV of 4.x (`Sample Size (Bytes)`, `Avg Samples/s`, `Avg Mbps`,
`CPU (%)`, `Intervals One-Way Latency`, `μs`) and JSON (`{"perftest":[{"length":...,
"intervals":[...],"summary":{...}}]}`). RTI latency is one-way, in microseconds.

A refusal (`... cannot be used ...`), `command terminated with exit code N`, or no result at
all is a failure with its reason, never a zero.
"""

from __future__ import annotations

import json
import re

from k8sdds.parsers.base import SAMPLE, SUMMARY, Parsed, Value

_NUM = r"([-+]?\d+(?:\.\d+)?)"
_LEGACY_THR = re.compile(
    r"Length:\s*(\d+)\s+Packets:\s*(\d+)\s+Packets/s\(ave\):\s*" + _NUM +
    r"\s+Mbps\(ave\):\s*" + _NUM + r"\s+Lost:\s*(\d+)(?:\s*\(" + _NUM + r"%\))?"
    r"(?:\s+CPU:?\s*" + _NUM + r"\s*(?:%|\(%\)))?")
_LEGACY_LAT = re.compile(
    r"Length:\s*(\d+)\s+Latency:\s+Ave\s+" + _NUM + r"\s+us\s+Std\s+" + _NUM + r"\s+us\s+"
    r"Min\s+" + _NUM + r"\s+us\s+Max\s+" + _NUM + r"\s+us\s+50%\s+" + _NUM + r"\s+us\s+"
    r"90%\s+" + _NUM + r"\s+us\s+99%\s+" + _NUM + r"\s+us\s+99\.99%\s+" + _NUM + r"\s+us\s+"
    r"99\.9999%\s+" + _NUM + r"\s+us(?:\s+CPU:?\s*" + _NUM + r"\s*(?:%|\(%\)))?")
_INTERVAL_THR = re.compile(
    r"^\s*Packets:\s*(\d+)\s+Packets/s:\s*(\d+)\s+Packets/s\(ave\):\s*" + _NUM +
    r"\s+Mbps:\s*" + _NUM + r"\s+Mbps\(ave\):\s*" + _NUM + r"\s+Lost:\s*(\d+)"
    r"(?:\s*\(" + _NUM + r"%\))?(?:\s+CPU:?\s*" + _NUM + r"\s*(?:%|\(%\)))?")
_INTERVAL_LAT = re.compile(
    r"^\s*One[ -]way Latency:\s*" + _NUM + r"\s*(?:us|μs)\s+Ave\s+" + _NUM +
    r"\s*(?:us|μs)\s+Std\s+" + _NUM + r"\s*(?:us|μs)\s+Min\s+" + _NUM +
    r"\s*(?:us|μs)\s+Max\s+" + _NUM + r"\s*(?:us|μs)(?:\s+CPU:?\s*" + _NUM + r")?",
    re.IGNORECASE)
_EXIT = re.compile(r"command terminated with exit code (\d+)")
_REFUSAL = re.compile(r"^(?!\s*(?:Length|Packets|One)).*?(cannot be used|cannot be|not "
                      r"supported|[Ee]rror[: ]|ERROR|Invalid|invalid|Unknown option|"
                      r"is not a valid|Exception).*$", re.MULTILINE)
_SECTION = re.compile(r"^\s*(Throughput Summary|One-?way Latency Summary|Interval Throughput"
                      r"|Intervals? One-?[Ww]ay Latency)\b.*:\s*$", re.IGNORECASE)

# CSV header (lower case, unit stripped) -> metric; a header may carry "(us)", "(μs)", "(%)"
_THR_COLUMNS = {
    "length": "data_len", "sample size": "data_len", "total samples": "received",
    "samples/s": "samples_per_s_interval", "ave samples/s": "samples_per_s",
    "avg samples/s": "samples_per_s", "mbps": "throughput_mbps_interval",
    "ave mbps": "throughput_mbps", "avg mbps": "throughput_mbps", "lost samples": "lost",
    "lost samples %": "lost_pct", "cpu": "cpu_pct", "cpu %": "cpu_pct",
}
_LAT_COLUMNS = {
    "length": "data_len", "sample size": "data_len", "latency": "latency_us",
    "ave": "latency_us_mean", "avg": "latency_us_mean", "std": "latency_us_std",
    "min": "latency_us_min", "max": "latency_us_max", "50%": "latency_us_p50",
    "90%": "latency_us_p90", "99%": "latency_us_p99", "99.99%": "latency_us_p9999",
    "99.9999%": "latency_us_p999999", "serialization": "serialize_us",
    "deserialization": "deserialize_us", "total": "serialization_total_us",
    "cpu": "cpu_pct", "cpu %": "cpu_pct",
}
_PER_INTERVAL = {"latency_us", "lost", "lost_pct", "cpu_pct"}
UNITS = {"throughput_mbps": "Mb/s", "samples_per_s": "samples/s", "received": "samples",
         "lost": "samples", "lost_pct": "%", "cpu_pct": "%", "data_len": "bytes"}


def _unit(metric: str) -> str:
    return UNITS.get(metric, "us" if metric.endswith("_us") or "latency_us" in metric else "")


def _header_key(name: str) -> str:
    name = name.strip().lower().replace("μs", "us")
    name = re.sub(r"\((?:bytes|us)\)", "", name)
    name = name.replace("(%)", "%").replace("(", "").replace(")", "")
    return re.sub(r"\s+", " ", name).strip()


def parse(text: str, role: str, latency_test: bool) -> Parsed:
    """Parse one Perftest process's output (pure: no I/O)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if '{"perftest"' in text.replace(" ", "").replace("\n", "").replace("\t", ""):
        values = _json(text)
    else:
        values = _csv(text) + _legacy(text)
    failure = _failure(text, role, latency_test, values)
    return Parsed(values=tuple(values), failure=failure)


def _failure(text: str, role: str, latency_test: bool, values: list[Value]) -> str | None:
    """Why this output holds no valid result: a non-zero exit, or the result its role must
    print missing (a throughput subscriber's rate, a latency publisher's latency)."""
    refusals = [m.group(0).strip() for m in _REFUSAL.finditer(text)]
    exit_code = _EXIT.search(text)
    summaries = {v.metric for v in values if v.kind == SUMMARY}
    needs = ("throughput_mbps" if not latency_test and role.startswith("sub") else
             "latency_us_mean" if latency_test and role == "pub" else None)
    reasons = []
    if exit_code and exit_code.group(1) != "0":
        reasons = refusals + [f"exit code {exit_code.group(1)}"]
    elif needs and needs not in summaries:
        reasons = refusals + ["no result line"]
    return "; ".join(dict.fromkeys(reasons)) or None


def _legacy(text: str) -> list[Value]:
    out: list[Value] = []
    t = 0
    for line in text.split("\n"):
        if m := _INTERVAL_THR.match(line):
            t += 1
            out += [Value("samples_per_s", float(m[2]), "samples/s", SAMPLE, t),
                    Value("throughput_mbps", float(m[4]), "Mb/s", SAMPLE, t),
                    Value("lost", float(m[6]), "samples", SAMPLE, t)]
            if m[8] is not None:
                out.append(Value("cpu_pct", float(m[8]), "%", SAMPLE, t))
        elif m := _INTERVAL_LAT.match(line):
            t += 1
            out.append(Value("latency_us", float(m[1]), "us", SAMPLE, t))
            if m[6] is not None:
                out.append(Value("cpu_pct", float(m[6]), "%", SAMPLE, t))
        elif m := _LEGACY_THR.search(line):
            out += [Value("received", float(m[2]), "samples"),
                    Value("samples_per_s", float(m[3]), "samples/s"),
                    Value("throughput_mbps", float(m[4]), "Mb/s"),
                    Value("lost", float(m[5]), "samples")]
            if m[6] is not None:
                out.append(Value("lost_pct", float(m[6]), "%"))
            if m[7] is not None:
                out.append(Value("cpu_pct", float(m[7]), "%"))
        elif m := _LEGACY_LAT.search(line):
            names = ["latency_us_mean", "latency_us_std", "latency_us_min", "latency_us_max",
                     "latency_us_p50", "latency_us_p90", "latency_us_p99", "latency_us_p9999",
                     "latency_us_p999999"]
            out += [Value(n, float(m[i + 2]), _unit(n)) for i, n in enumerate(names)]
            if m[11] is not None:
                out.append(Value("cpu_pct", float(m[11]), "%"))
    return out


def _csv(text: str) -> list[Value]:
    out: list[Value] = []
    lines = text.split("\n")
    i = 0
    t = 0
    while i < len(lines):
        sec = _SECTION.match(lines[i])
        if not sec:
            i += 1
            continue
        title = sec.group(1).lower()
        latency = "latency" in title
        interval = title.startswith("interval")
        columns = _LAT_COLUMNS if latency else _THR_COLUMNS
        i += 1
        while i < len(lines) and not lines[i].strip():
            i += 1
        if i >= len(lines):
            break
        header = [_header_key(h) for h in lines[i].split(",")]
        metrics = [columns.get(h) for h in header]
        i += 1
        while i < len(lines) and lines[i].strip() and not _SECTION.match(lines[i]):
            cells = [c.strip() for c in lines[i].split(",")]
            i += 1
            if len(cells) != len(header):
                continue  # a truncated row: not a result
            try:
                numbers = [float(c) for c in cells]
            except ValueError:
                continue
            t += interval
            for metric, number in zip(metrics, numbers, strict=True):
                if metric is None or metric == "data_len":
                    continue
                name = metric.removesuffix("_interval")
                if interval:
                    if metric in _PER_INTERVAL or metric.endswith("_interval"):
                        out.append(Value(name, number, _unit(name), SAMPLE, t))
                    # else a running average or extreme since the start: the summary has it
                elif not metric.endswith("_interval"):
                    out.append(Value(name, number, _unit(name)))
    return out


# JSON keys (lower case) -> metric, for summaries and intervals
_JSON_KEYS = {
    "latency": "latency_us", "latency_ave": "latency_us_mean", "latency_std": "latency_us_std",
    "latency_min": "latency_us_min", "latency_max": "latency_us_max",
    "latency_50": "latency_us_p50", "latency_90": "latency_us_p90",
    "latency_99": "latency_us_p99", "latency_99.99": "latency_us_p9999",
    "latency_99.9999": "latency_us_p999999", "packets": "received",
    "packets/s": "samples_per_s", "packets/s_ave": "samples_per_s_ave", "mbps": "throughput_mbps",
    "mbps_ave": "throughput_mbps_ave", "lost": "lost", "lost_percent": "lost_pct",
    "cpu": "cpu_pct", "serialize": "serialize_us", "deserialize": "deserialize_us",
    "total_s": "serialization_total_us",
}


def _json(text: str) -> list[Value]:
    start = text.find("{")
    try:
        doc, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return []
    out: list[Value] = []
    t = 0
    for block in doc.get("perftest", []) if isinstance(doc, dict) else []:
        if not isinstance(block, dict):
            continue
        for interval in block.get("intervals") or []:
            t += 1
            for key, value in interval.items():
                metric = _JSON_KEYS.get(key.lower())
                if metric and metric != "received" and isinstance(value, (int, float)):
                    name = metric.removesuffix("_ave")
                    if metric.endswith("_ave"):
                        continue  # running averages: the summary has the final one
                    out.append(Value(name, float(value), _unit(name), SAMPLE, t))
        for key, value in (block.get("summary") or {}).items():
            metric = _JSON_KEYS.get(key.lower())
            if metric and isinstance(value, (int, float)):
                name = metric.removesuffix("_ave") if metric.startswith(
                    ("samples_per_s", "throughput_mbps")) else metric
                out.append(Value(name, float(value), _unit(name)))
    return out
