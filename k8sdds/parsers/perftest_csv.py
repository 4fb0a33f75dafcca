"""RTI Perftest's CSV sections (3.x and 4.x: `Throughput Summary:`, `Interval
Throughput:`, `One-way Latency Summary:`, ...) read line by line as a log's pieces come, and
the metric names and units every Perftest format shares (`rtiperftest` reads the logs)."""

from __future__ import annotations

import csv
import io
import re

import numpy as np

from k8sdds.parsers.base import Value

# with -noPrintIntervals, Perftest 4.x prints its summary's header with no title before it
_UNTITLED = "Sample Size (Bytes),"
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


def unit(metric: str) -> str:
    return UNITS.get(metric, "us" if metric.endswith("_us") or "latency_us" in metric else "")


def _header_key(name: str) -> str:
    name = name.strip().lower().replace("μs", "us")
    name = re.sub(r"\((?:bytes|us)\)", "", name)
    name = name.replace("(%)", "%").replace("(", "").replace(")", "")
    return re.sub(r"\s+", " ", name).strip()


def numeric(series) -> np.ndarray:
    import pandas as pd

    if pd.api.types.is_numeric_dtype(series):
        return series.to_numpy(dtype=float)
    return pd.to_numeric(series.astype(str).str.strip(), errors="coerce").to_numpy(dtype=float)


class Sections:
    """The CSV sections of 3.x and 4.x (`Throughput Summary:`, `Interval Throughput:`, ...):
    a title, blank lines, a header, then rows with as many commas as the header, to the
    first blank line, title or line of other commas (a note among the rows is passed over).
    Read line by line across pieces; rows gathered and read by pandas a batch at a time."""

    BATCH = 200_000  # rows of an interval section read at a time

    def __init__(self):
        self.state = "seek"  # seek -> header -> rows
        self.title = ""
        self.kept: list[tuple[int, str, str]] = []
        self.width = 0
        self.rows: list[str] = []
        self.t = 0  # interval rows read so far, of every section

    def feed(self, piece: str, values: list[Value], samples) -> None:
        if self.state == "seek" and "Summary" not in piece and "Interval" not in piece \
                and _UNTITLED not in piece:
            return  # no title in it
        lines = piece.split("\n")
        if piece.endswith("\n"):
            lines.pop()  # the piece's own end, not a blank line: a section goes on past it
        for line in lines:
            self._line(line, values, samples)
        if len(self.rows) >= self.BATCH:
            self._flush(values, samples)

    def _line(self, line: str, values: list[Value], samples) -> None:
        if self.state == "rows":
            if line.count(",") == self.width - 1:
                self.rows.append(line)
                return
            if "," not in line and line.strip() and not line.rstrip().endswith(":"):
                # a note among the rows ("Waiting for data ...", or "Finishing test due to
                # timer..." on stderr, which a pod's log interleaves with stdout's rows as
                # their buffers are written): the section goes on
                return
            self._flush(values, samples)
            self.state = "seek"  # and this line may be the next title
        if self.state == "header":
            if line.strip():
                self._header(line)
            return
        sec = _SECTION.match(line) if line.rstrip().endswith(":") else None
        if sec:
            self.title, self.state = sec.group(1).lower(), "header"
        elif line.startswith(_UNTITLED):  # -noPrintIntervals: a summary with no title
            latency = "ave" in {_header_key(h) for h in line.split(",")}
            self.title = "one-way latency summary" if latency else "throughput summary"
            self._header(line)

    def _header(self, line: str) -> None:
        interval = self.title.startswith("interval")
        names = _LAT_COLUMNS if "latency" in self.title else _THR_COLUMNS
        header = line.split(",")
        self.kept = []
        for k, h in enumerate(header):
            metric = names.get(_header_key(h))
            if metric is None or metric == "data_len":
                continue
            name = metric.removesuffix("_interval")
            if interval and (metric in _PER_INTERVAL or metric.endswith("_interval")):
                self.kept.append((k, name, unit(name)))
            elif not interval and not metric.endswith("_interval"):
                self.kept.append((k, name, unit(name)))
        self.width, self.state, self.rows = len(header), "rows", []

    def _flush(self, values: list[Value], samples) -> None:
        import pandas as pd

        rows, self.rows = self.rows, []
        if not rows or not self.kept:
            return
        frame = pd.read_csv(io.StringIO("\n".join(rows)), header=None,
                            usecols=[k for k, _, _ in self.kept], engine="c",
                            skipinitialspace=True, quoting=csv.QUOTE_NONE)
        if self.title.startswith("interval"):
            stamps = np.arange(self.t + 1, self.t + 1 + len(frame), dtype=float)
            self.t += len(frame)
            for k, name, unit in self.kept:
                got = numeric(frame[k])
                ok = ~np.isnan(got)
                samples(name, unit).add(stamps[ok], got[ok])
        else:
            for k, name, unit in self.kept:
                values += [Value(name, v, unit) for v in numeric(frame[k]).tolist()
                           if v == v]  # not nan

    def finish(self, values: list[Value], samples) -> None:
        if self.state == "rows":
            self._flush(values, samples)
