"""k8sdds-mqtt and mosquitto output -> values.

k8sdds-mqtt prints its per-second lines in ddsperf's format (engines/mqtt/main.go), so its
publisher, subscribers, ping and pong read as ddsperf's do. The broker measures nothing: its
log counts only for the errors mosquitto reports (`<time>: Error: ...`).
"""

from __future__ import annotations

import re

from k8sdds.parsers import ddsperf, latency
from k8sdds.parsers.base import Parsed
from k8sdds.parsers.latency import Printed
from k8sdds.parsers.reader import Parser

# what mqtt's program prints as a latency, and where its source says so
PRINTED = Printed(
    "k8sdds-mqtt (engines/mqtt)",
    "the round trip: the pong's receipt minus the ping's send",
    1.0, "engines/mqtt/main.go",
    "rtts = append(rtts, float64(time.Since(sentAt).Nanoseconds())/1e3)")


BROKER = "broker"
_BROKER_ERROR = re.compile(r"^(?:\d+:\s+)?Error:\s*(?P<msg>.+)$")


def parse(text: str, role: str, latency_test: bool) -> Parsed:
    """Parse one role's output (pure: no I/O)."""
    if role == BROKER:
        errors = [m["msg"].strip() for line in text.splitlines()
                  if (m := _BROKER_ERROR.match(line.strip()))]
        return Parsed(failure="mosquitto: " + "; ".join(dict.fromkeys(errors)) if errors
                      else None)
    return latency.round_trips(ddsperf.read(text, role, latency_test),
                               PRINTED.factor)


# what the engine that runs this program reads its logs with
PARSER = Parser("mqtt", parse, PRINTED)
