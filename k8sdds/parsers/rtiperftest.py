"""RTI Perftest output -> values; one parser for every format, chosen by content.

Formats: the legacy lines of 3.x (`Length: ... Packets/s(ave) ... Mbps(ave) ... Lost ... CPU`,
`Length: ... Latency: Ave ... 99.9999% ... CPU`, interval lines `Packets: ... Packets/s: ...`
and `One way Latency: ...`, 4.0 `One-Way Latency:`), the CSV summaries of 3.x
(`Throughput Summary:` / `One-way Latency Summary:` + header + rows, with or without CPU and
serialization columns), the CSV of 4.x (`Sample Size (Bytes)`, `Avg Samples/s`, `Avg Mbps`,
`CPU (%)`, `Intervals One-Way Latency`, `μs`) and JSON (`{"perftest":[{"length":...,
"intervals":[...],"summary":{...}}]}`). RTI latency is one-way, in microseconds.

pandas is imported where a table is read, not with the module: every `k8sdds` command imports
the parsers, and most never read an RTI log.

A refusal (`... cannot be used ...`), `command terminated with exit code N`, or no result at
all is a failure with its reason, never a zero.
"""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np

from k8sdds.parsers.base import SUMMARY, Column, Parsed, Value

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
    r"^[ \t]*Packets:\s*(\d+)\s+Packets/s:\s*(\d+)\s+Packets/s\(ave\):\s*" + _NUM +
    r"\s+Mbps:\s*" + _NUM + r"\s+Mbps\(ave\):\s*" + _NUM + r"\s+Lost:\s*(\d+)"
    r"(?:\s*\(" + _NUM + r"%\))?(?:\s+CPU:?\s*" + _NUM + r"\s*(?:%|\(%\)))?",
    re.MULTILINE)
_INTERVAL_LAT = re.compile(
    r"^[ \t]*One[ -]way Latency:\s*" + _NUM + r"\s*(?:us|μs)\s+Ave\s+" + _NUM +
    r"\s*(?:us|μs)\s+Std\s+" + _NUM + r"\s*(?:us|μs)\s+Min\s+" + _NUM +
    r"\s*(?:us|μs)\s+Max\s+" + _NUM + r"\s*(?:us|μs)(?:\s+CPU:?\s*" + _NUM + r")?",
    re.IGNORECASE | re.MULTILINE)
_EXIT = re.compile(r"command terminated with exit code (\d+)")
_REFUSAL = re.compile(r"^(?!\s*(?:Length|Packets|One)).*?(cannot be used|cannot be|not "
                      r"supported|[Ee]rror[: ]|ERROR|Invalid|invalid|Unknown option|"
                      r"is not a valid|Exception).*$", re.MULTILINE)
_ENDS = 64 * 1024
_REFUSAL_WORDS = ("cannot", "rror", "RROR", "nvalid", "not supported", "Unknown option",
                  "not a valid", "Exception")
_JSON_START = re.compile(r'\{\s*"perftest"\s*:')
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
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if '"perftest"' in text and _JSON_START.search(text):
        values, columns = _json(text)
    else:
        csv_values, csv_columns = _csv(text)
        legacy_values, legacy_columns = _legacy(text)
        values, columns = csv_values + legacy_values, csv_columns + legacy_columns
    failure = _failure(text, role, latency_test, values)
    return Parsed(values=tuple(values), failure=failure, columns=tuple(columns))


def _numeric(series) -> np.ndarray:
    import pandas as pd

    if pd.api.types.is_numeric_dtype(series):
        return series.to_numpy(dtype=float)
    return pd.to_numeric(series.astype(str).str.strip(), errors="coerce").to_numpy(dtype=float)


CHUNK = 8 << 20  # characters of a log read at a time for its interval lines


def _chunks(text: str, size: int = CHUNK):
    """`text` in pieces of about `size` characters, each ending at a line's end: a long log's
    interval lines are picked and parsed a piece at a time, never all as one list."""
    start, n = 0, len(text)
    while start < n:
        end = text.find("\n", min(start + size, n))
        end = n if end < 0 else end + 1
        yield text[start:end]
        start = end


def _interval_columns(text: str, keep, first_line, wanted: dict[str, tuple[str, str]]
                      ) -> list[Column]:
    """The interval lines of `text` that `keep` accepts (the first of them matching
    `first_line`), parsed a chunk at a time and joined: one Column per metric."""
    parts: dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
    layout, done = None, 0
    for chunk in _chunks(text):
        lines = [line for line in chunk.split("\n") if keep(line)]
        if not lines:
            continue
        if layout is None:
            if not first_line.match(lines[0]):
                return []
            layout = lines[0]
        for col in _token_columns(lines, wanted, layout, done):
            parts.setdefault((col.metric, col.unit), []).append((col.t, col.values))
        done += len(lines)
    return [Column(metric, unit, np.concatenate([t for t, _ in got]),
                   np.concatenate([v for _, v in got]))
            for (metric, unit), got in parts.items()]


def _token_columns(lines: list[str], wanted: dict[str, tuple[str, str]],
                   layout: str | None = None, before: int = 0) -> list[Column]:
    """Interval lines of one layout, read by pandas' C tokenizer: `wanted` maps the label a
    value follows (`Mbps:`) to (metric, unit), positions taken from `layout` (the first
    line); their interval numbers follow `before` lines already read."""
    import pandas as pd

    tokens = (layout or lines[0]).split()
    positions = {tokens.index(label) + 1: plan for label, plan in wanted.items()
                 if label in tokens and tokens.index(label) + 1 < len(tokens)}
    if not positions:
        return []
    # one layout per file: a line with another number of fields is skipped
    frame = pd.read_csv(io.StringIO("\n".join(lines)), sep=r"\s+", header=None,
                        usecols=sorted(positions), engine="c", on_bad_lines="skip",
                        quoting=csv.QUOTE_NONE)  # a stray quote is a character, not a string
    t = np.arange(before + 1, before + len(frame) + 1, dtype=float)
    out = []
    for pos, (metric, unit) in positions.items():
        values = _numeric(frame[pos])
        ok = ~np.isnan(values)
        if ok.any():
            out.append(Column(metric, unit, t[ok], values[ok]))
    return out


def _failure(text: str, role: str, latency_test: bool, values: list[Value]) -> str | None:
    """Why this output holds no valid result: a non-zero exit, or the result its role must
    print missing (a throughput subscriber's rate, a latency publisher's latency)."""
    # Perftest prints refusals and errors before its results or after them, not among the
    # interval lines: look at the head and the tail only
    ends = text if len(text) <= 2 * _ENDS else text[:_ENDS] + "\n" + text[-_ENDS:]
    refusals = ([m.group(0).strip() for m in _REFUSAL.finditer(ends)]
                if any(w in ends for w in _REFUSAL_WORDS) else [])
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


def _legacy(text: str) -> tuple[list[Value], list[Column]]:
    out: list[Value] = []
    columns: list[Column] = []
    if "Packets:" in text:
        columns += _interval_columns(
            text, lambda line: line.startswith("Packets:") or line.lstrip().startswith(
                "Packets:"), _INTERVAL_THR, {
                "Packets/s:": ("samples_per_s", "samples/s"), "Mbps:": ("throughput_mbps", "Mb/s"),
                "Lost:": ("lost", "samples"), "CPU": ("cpu_pct", "%"), "CPU:": ("cpu_pct", "%")})
    if "atency:" in text:
        columns += _interval_columns(
            text, lambda line: line[:16] in _LAT_STARTS or line.lstrip()[:16].lower() in (
                "one way latency:", "one-way latency:"), _INTERVAL_LAT,
            {"Latency:": ("latency_us", "us"), "CPU": ("cpu_pct", "%"),
             "CPU:": ("cpu_pct", "%")})
    if "Length:" in text:
        for m in _LEGACY_THR.finditer(text):
            out += [Value("received", float(m[2]), "samples"),
                    Value("samples_per_s", float(m[3]), "samples/s"),
                    Value("throughput_mbps", float(m[4]), "Mb/s"),
                    Value("lost", float(m[5]), "samples")]
            if m[6] is not None:
                out.append(Value("lost_pct", float(m[6]), "%"))
            if m[7] is not None:
                out.append(Value("cpu_pct", float(m[7]), "%"))
        for m in _LEGACY_LAT.finditer(text):
            out += [Value(n, float(m[i + 2]), "us") for i, n in enumerate(_LAT_NAMES)]
            if m[11] is not None:
                out.append(Value("cpu_pct", float(m[11]), "%"))
    return out, columns


_LAT_STARTS = ("One way Latency:", "One-Way Latency:", "One-way Latency:")
_LAT_NAMES = ["latency_us_mean", "latency_us_std", "latency_us_min", "latency_us_max",
              "latency_us_p50", "latency_us_p90", "latency_us_p99", "latency_us_p9999",
              "latency_us_p999999"]


def _csv(text: str) -> tuple[list[Value], list[Column]]:
    import pandas as pd

    if "Summary:" not in text and "Interval" not in text:
        return [], []
    out: list[Value] = []
    columns: list[Column] = []
    lines = text.split("\n")
    i, t = 0, 0
    while i < len(lines):
        sec = _SECTION.match(lines[i]) if lines[i].rstrip().endswith(":") else None
        if not sec:
            i += 1
            continue
        title = sec.group(1).lower()
        interval = title.startswith("interval")
        names = _LAT_COLUMNS if "latency" in title else _THR_COLUMNS
        i += 1
        while i < len(lines) and not lines[i].strip():
            i += 1
        if i >= len(lines):
            break
        header = lines[i].split(",")
        # per column: (metric, unit) when the column is kept in this section
        kept = []
        for k, h in enumerate(header):
            metric = names.get(_header_key(h))
            if metric is None or metric == "data_len":
                continue
            name = metric.removesuffix("_interval")
            if interval and (metric in _PER_INTERVAL or metric.endswith("_interval")):
                kept.append((k, name, _unit(name)))
            elif not interval and not metric.endswith("_interval"):
                kept.append((k, name, _unit(name)))
        width = len(header)
        i += 1
        first = i
        while i < len(lines) and lines[i].count(",") == width - 1:
            i += 1  # the rows of the section; it ends at a blank line, a title, a cut row
        if first == i or not kept:
            continue
        frame = pd.read_csv(io.StringIO("\n".join(lines[first:i])), header=None,
                            usecols=[k for k, _, _ in kept], engine="c",
                            skipinitialspace=True, quoting=csv.QUOTE_NONE)
        if interval:
            stamps = np.arange(t + 1, t + 1 + len(frame), dtype=float)
            t += len(frame)
            for k, name, unit in kept:
                values = _numeric(frame[k])
                ok = ~np.isnan(values)
                columns.append(Column(name, unit, stamps[ok], values[ok]))
        else:
            for k, name, unit in kept:
                for value in _numeric(frame[k]).tolist():
                    if value == value:  # not nan
                        out.append(Value(name, value, unit))
    return out, columns


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


def _json(text: str) -> tuple[list[Value], list[Column]]:
    import pandas as pd

    start = text.find("{")
    try:
        doc, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return [], []
    out: list[Value] = []
    columns: list[Column] = []
    t = 0
    for block in doc.get("perftest", []) if isinstance(doc, dict) else []:
        if not isinstance(block, dict):
            continue
        intervals = [iv for iv in block.get("intervals") or [] if isinstance(iv, dict)]
        if intervals:
            frame = pd.DataFrame.from_records(intervals)
            stamps = np.arange(t + 1, t + 1 + len(frame), dtype=float)
            t += len(frame)
            for key in frame.columns:
                plan = _JSON_INTERVAL.get(key)
                if plan:
                    values = _numeric(frame[key])
                    ok = ~np.isnan(values)
                    columns.append(Column(plan[0], plan[1], stamps[ok], values[ok]))
        for key, value in (block.get("summary") or {}).items():
            plan = _JSON_SUMMARY.get(key.lower())
            if plan and isinstance(value, (int, float)):
                out.append(Value(plan[0], float(value), plan[1]))
    return out, columns


def _json_plans() -> tuple[dict, dict]:
    interval, summary = {}, {}
    for key, metric in _JSON_KEYS.items():
        if metric != "received" and not metric.endswith("_ave"):  # running averages: no
            interval[key] = (metric, _unit(metric))
        name = metric.removesuffix("_ave")
        summary[key] = (name, _unit(name))
    return interval, summary


_JSON_INTERVAL, _JSON_SUMMARY = _json_plans()
