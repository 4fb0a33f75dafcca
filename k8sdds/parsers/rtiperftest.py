"""RTI Perftest output -> values; one parser for every format, chosen by content.

Formats: the legacy lines of 3.x (`Length: ... Packets/s(ave) ... Mbps(ave) ... Lost ... CPU`,
`Length: ... Latency: Ave ... 99.9999% ... CPU`, interval lines `Packets: ... Packets/s: ...`
and `One way Latency: ...`, 4.0 `One-Way Latency:`), the CSV summaries of 3.x
(`Throughput Summary:` / `One-way Latency Summary:` + header + rows, with or without CPU and
serialization columns), the CSV of 4.x (`Sample Size (Bytes)`, `Avg Samples/s`, `Avg Mbps`,
`CPU (%)`, `Intervals One-Way Latency`, `μs`) and JSON (`{"perftest":[{"length":...,
"intervals":[...],"summary":{...}}]}`). Perftest prints half the round trip ("one-way"), in
microseconds; its latencies are stored as round trips (`PRINTED`), and a latency
publisher's interval lines, one a pong, are counted as its `roundtrips`.

pandas is imported where a table is read, not with the module: every `k8sdds` command imports
the parsers, and most never read an RTI log.

A refusal (`... cannot be used ...`), `command terminated with exit code N`, or no result at
all is a failure with its reason, never a zero.

The stream beside a round trip (`load`, role SINK) is stopped before its publisher ends the
test, so Perftest never prints its summary: its `throughput_mbps` and `samples_per_s` are the
means of its interval lines (Perftest's `Mbps:` and `Packets/s:` of each second), the first
and the last left out (partial seconds), as ddsperf's are read.

A log is read a piece at a time (`Stream`; `parse` of a text is the same over its pieces):
interval samples are thinned as they come (`base.Samples`), the CSV sections are read across
pieces (`perftest_csv.Sections`), so memory does not grow with a log's lines.
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np

from k8sdds.model import SINK
from k8sdds.parsers import latency
from k8sdds.parsers.base import SUMMARY, Parsed, Samples, Trace, Value, steady
from k8sdds.parsers.latency import Printed
from k8sdds.parsers.perftest_csv import Sections, numeric
from k8sdds.parsers.perftest_json import Document
from k8sdds.parsers.reader import Parser

# what rtiperftest's program prints as a latency, and where its source says so
PRINTED = Printed(
    "perftest_cpp (RTI Perftest; also the K8sDDS study's published tree)",
    "half the round trip, called one-way latency",
    2.0, "srcCpp/perftest_cpp.cxx", "latency /= 2;")


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
def parse(text: str, role: str, latency_test: bool) -> Parsed:
    """Parse one Perftest process's output (pure: no I/O): `Stream` fed the text a piece at
    a time."""
    stream = Stream(role, latency_test)
    for piece in _chunks(text):
        stream.feed(piece)
    return stream.result()


CHUNK = 2 << 20  # characters of a log read at a time


def _chunks(text: str, size: int | None = None):
    """`text` in pieces of about `size` characters (CHUNK, as it is when called), each
    ending at a line's end."""
    size = size or CHUNK
    start, n = 0, len(text)
    while start < n:
        end = text.find("\n", min(start + size, n))
        end = n if end < 0 else end + 1
        yield text[start:end]
        start = end


class _Lines:
    """One kind of legacy interval line (`Packets: ...`, `One way Latency: ...`): the
    first one fixes the layout (a first line of another shape: none of them is read),
    each piece's lines are read by pandas' C tokenizer and numbered on from the last."""

    def __init__(self, marker: str, keep, first_line, wanted: dict[str, tuple[str, str]]):
        self.marker, self.keep, self.first_line, self.wanted = marker, keep, first_line, wanted
        self.layout: str | None = None
        self.off, self.done = False, 0

    def feed(self, piece: str, samples) -> None:
        if self.off or self.marker not in piece:
            return
        lines = [line for line in piece.split("\n") if self.keep(line)]
        if not lines:
            return
        if self.layout is None:
            if not self.first_line.match(lines[0]):
                self.off = True
                return
            self.layout = lines[0]
        for col in _token_columns(lines, self.wanted, self.layout, self.done):
            samples(col.metric, col.unit).add(col.t, col.values)
        self.done += len(lines)


def _legacy_lines() -> tuple[_Lines, _Lines]:
    cpu = {"CPU": ("cpu_pct", "%"), "CPU:": ("cpu_pct", "%")}
    return (_Lines("Packets:", lambda line: line.lstrip().startswith("Packets:"),
                   _INTERVAL_THR, {"Packets/s:": ("samples_per_s", "samples/s"),
                                   "Mbps:": ("throughput_mbps", "Mb/s"),
                                   "Lost:": ("lost", "samples"), **cpu}),
            _Lines("atency:", lambda line: line[:16] in _LAT_STARTS or line.lstrip()[
                :16].lower() in ("one way latency:", "one-way latency:"), _INTERVAL_LAT,
                   {"Latency:": ("latency_us", "us"), **cpu}))


class Stream:
    """One Perftest process's output read a piece at a time (`feed`, each piece ending at a
    line's end; `result` at the end). Memory holds a piece, the log's first and last 64 KiB
    (where refusals are printed) and at most MAX_SAMPLES samples of each metric (`Samples`,
    thinned as read), whatever the log's length; a JSON log is read as its text comes too
    (`perftest_json.Document`)."""

    def __init__(self, role: str, latency_test: bool):
        self.role, self.latency_test = role, latency_test
        self._start = ""  # the first 2 * _ENDS characters
        self._tail = ""  # the last _ENDS characters
        self._size = 0
        self._pending: list[str] | None = []  # pieces until the format is known
        self._json: Document | None = None
        self._exit: str | None = None
        self._values: list[Value] = []
        self._samples: dict[tuple[str, str], Samples] = {}
        self._lines = _legacy_lines()
        self._sections = Sections()

    def _sample(self, metric: str, unit: str) -> Samples:
        return self._samples.setdefault((metric, unit), Samples(metric, unit))

    def feed(self, piece: str) -> None:
        if "\r" in piece:
            piece = piece.replace("\r\n", "\n").replace("\r", "\n")
        if len(self._start) < 2 * _ENDS:
            self._start += piece[:2 * _ENDS - len(self._start)]
        self._tail = (self._tail[-_ENDS:] + piece[-_ENDS:])[-_ENDS:]
        self._size += len(piece)
        if self._exit is None and (m := _EXIT.search(piece)):
            self._exit = m.group(1)
        if self._pending is not None:  # JSON if its start is in the log's head
            self._pending.append(piece)
            if start := _JSON_START.search(self._start[:_ENDS]):
                held, self._pending = "".join(self._pending), None
                self._json = Document(self._values, self._sample)
                self._json.feed(held[start.start():])
            elif len(self._start) >= _ENDS:
                pending, self._pending = self._pending, None
                for held in pending:
                    self._read(held)
            return
        if self._json is not None:
            self._json.feed(piece)
        else:
            self._read(piece)

    def _read(self, piece: str) -> None:
        for lines in self._lines:
            lines.feed(piece, self._sample)
        self._sections.feed(piece, self._values, self._sample)
        if "Length:" in piece:
            self._values += _summary_lines(piece)

    def result(self) -> Parsed:
        """What the output measured, or why it holds no valid result."""
        if self._pending is not None:  # shorter than the head: not JSON
            pending, self._pending = self._pending, None
            for held in pending:
                self._read(held)
        if self._json is not None:
            self._json.finish()
        else:
            self._sections.finish(self._values, self._sample)
        values = self._values
        columns = [c for c in (s.column() for s in self._samples.values()) if c]
        if self.role == SINK:
            values = values + _carried(values, self._samples)
        pongs = self._samples.get(("latency_us", "us"))
        if pongs is not None and self.latency_test and self.role == "pub" and pongs.seen:
            values = [*values, Value("roundtrips", float(pongs.seen), "roundtrips")]
        ends = (self._start if self._size <= 2 * _ENDS
                else self._start[:_ENDS] + "\n" + self._tail)
        failure = _failure(ends, self._exit, self.role, self.latency_test, values)
        return latency.round_trips(
            Parsed(values=tuple(values), failure=failure, columns=tuple(columns)),
            PRINTED.factor)


def _token_columns(lines: list[str], wanted: dict[str, tuple[str, str]],
                   layout: str | None = None, before: int = 0) -> list[Trace]:
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
    for pos, (metric, measure) in positions.items():
        values = numeric(frame[pos])
        ok = ~np.isnan(values)
        if ok.any():
            out.append(Trace(metric, measure, t[ok], values[ok]))
    return out


def _carried(values: list[Value], samples: dict[tuple[str, str], Samples]) -> list[Value]:
    """A stream's receiver's summary from its interval lines, where it printed none."""
    if any(v.kind == SUMMARY and v.metric == "throughput_mbps" for v in values):
        return []
    out = []
    for metric, unit in (("throughput_mbps", "Mb/s"), ("samples_per_s", "samples/s")):
        column = samples[(metric, unit)].column() if (metric, unit) in samples else None
        if column is None:
            continue
        used = steady(column.values)
        out.append(Value(metric, float(np.mean(used)), unit))
        if metric == "throughput_mbps":
            out.append(Value("intervals", float(len(used)), "intervals"))
    return out


def _failure(ends: str, exit_code: str | None, role: str, latency_test: bool,
             values: list[Value]) -> str | None:
    """Why this output holds no valid result: a non-zero exit, or the result its role must
    print missing (a throughput subscriber's rate, a latency publisher's latency). Perftest
    prints refusals and errors before its results or after them, not among the interval
    lines: `ends` is the head and the tail of the output."""
    refusals = ([m.group(0).strip() for m in _REFUSAL.finditer(ends)]
                if any(w in ends for w in _REFUSAL_WORDS) else [])
    summaries = {v.metric for v in values if v.kind == SUMMARY}
    needs = ("throughput_mbps" if not latency_test and role.startswith(("sub", SINK)) else
             "latency_us_mean" if latency_test and role == "pub" else None)
    reasons = []
    if exit_code is not None and exit_code != "0":
        reasons = refusals + [f"exit code {exit_code}"]
    elif needs and needs not in summaries:
        reasons = refusals + ["no result line"]
    return "; ".join(dict.fromkeys(reasons)) or None


def _summary_lines(piece: str) -> list[Value]:
    """The legacy result lines (`Length: ... Packets/s(ave) ...`, `Length: ... Latency:
    Ave ...`) of a piece."""
    out: list[Value] = []
    for m in _LEGACY_THR.finditer(piece):
        out += [Value("received", float(m[2]), "samples"),
                Value("samples_per_s", float(m[3]), "samples/s"),
                Value("throughput_mbps", float(m[4]), "Mb/s"),
                Value("lost", float(m[5]), "samples")]
        if m[6] is not None:
            out.append(Value("lost_pct", float(m[6]), "%"))
        if m[7] is not None:
            out.append(Value("cpu_pct", float(m[7]), "%"))
    for m in _LEGACY_LAT.finditer(piece):
        out += [Value(n, float(m[i + 2]), "us") for i, n in enumerate(_LAT_NAMES)]
        if m[11] is not None:
            out.append(Value("cpu_pct", float(m[11]), "%"))
    return out


_LAT_STARTS = ("One way Latency:", "One-Way Latency:", "One-way Latency:")
_LAT_NAMES = ["latency_us_mean", "latency_us_std", "latency_us_min", "latency_us_max",
              "latency_us_p50", "latency_us_p90", "latency_us_p99", "latency_us_p9999",
              "latency_us_p999999"]


# what the engine that runs this program reads its logs with
PARSER = Parser("rtiperftest", parse, PRINTED, stream=Stream)
