"""What an RTI Perftest log says of its own test: the header 3.x prints before it runs (mode,
Perftest, Transport and Secure Configuration). Pure: text in, the schedule fields it names
out; a field the header does not print is absent (legacy 3.0 prints less)."""

from __future__ import annotations

import re

_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z /()-]*?):\s*(.*?)\s*$")
HEADER_END = ("Waiting to discover", "Waiting for", "Publishing data", "Receiving data",
              "Interval time", "Length:")


def header(text: str) -> dict[str, object]:
    """Test fields from the log's header: data_len, best_effort, batch_size, duration,
    latency_test, multicast, transport, secure, num_subscribers (the publisher's "Waiting to
    discover N subscribers"), and `version` (the Perftest release)."""
    out: dict[str, object] = {}
    section = ""
    for raw in text.splitlines()[:120]:
        line = raw.strip()
        if m := re.match(r"Waiting to discover (\d+) subscribers", line):
            out["num_subscribers"] = int(m[1])
        if line.startswith(HEADER_END):
            break
        if m := re.match(r"RTI Perftest (\d+\.\d+(?:\.\d+)?)", line):
            out["version"] = m[1]
            continue
        if line.startswith("Mode:"):
            out["latency_test"] = "LATENCY" in line.upper()
            continue
        if line.endswith("Configuration:"):
            section = line[: -len(" Configuration:")].lower()
            if section == "secure":
                out["secure"] = True
            continue
        m = _LINE.match(raw)
        if not m:
            continue
        key, value = m[1].strip().lower(), m[2]
        if section == "perftest":
            _perftest(key, value, out)
        elif section == "transport":
            _transport(key, value, out)
    return out


def _perftest(key: str, value: str, out: dict) -> None:
    if key == "reliability":
        out["best_effort"] = "best" in value.lower()
    elif key == "data size" and (m := re.match(r"(\d+)", value)):
        out["data_len"] = int(m[1])
    elif key == "batching":
        m = re.match(r"(\d+)", value)
        out["batch_size"] = int(m[1]) if m else 0
    elif key == "execution time" and (m := re.match(r"(\d+)", value)):
        out["duration"] = int(m[1])


def _transport(key: str, value: str, out: dict) -> None:
    if key == "kind":
        kind = value.upper()
        out["transport"] = ("tls" if "TLS" in kind else "tcp" if "TCP" in kind
                            else "udp")
    elif key == "use multicast":
        out["multicast"] = value.lower().startswith("true")
