"""k8sdds-zenoh output -> values.

k8sdds-zenoh prints its per-second lines in ddsperf's format (engines/zenoh), so its
publisher, subscribers, ping and pong read as ddsperf's do. The router (k8sdds-zenoh -mode
router; zenohd in runs made before it) measures nothing: its log counts only for the errors
it reports (Zenoh's tracing `ERROR` lines, k8sdds-zenoh's own `error:` lines).
"""

from __future__ import annotations

import re

from k8sdds.parsers import ddsperf, latency
from k8sdds.parsers.base import Parsed
from k8sdds.parsers.latency import Printed
from k8sdds.parsers.reader import Parser

# what zenoh's program prints as a latency, and where its source says so
PRINTED = Printed(
    "k8sdds-zenoh (engines/zenoh)",
    "the round trip: the pong's receipt minus the ping's send",
    1.0, "engines/zenoh/src/main.rs",
    "rtts.push(sent_at.elapsed().as_nanos() as f64 / 1e3);")


ROUTER = "router"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ROUTER_ERROR = re.compile(r"^\S+\s+ERROR\s+(?:.*?\s)?\S+:\s(?P<msg>.+)$")
_OWN_ERROR = re.compile(r"^error: (?P<msg>.+)$")


def parse(text: str, role: str, latency_test: bool) -> Parsed:
    """Parse one role's output (pure: no I/O)."""
    if role == ROUTER:
        errors = [m["msg"].strip() for line in text.splitlines()
                  if (m := _ROUTER_ERROR.match(_ANSI.sub("", line).strip())
                      or _OWN_ERROR.match(line.strip()))]
        return Parsed(failure="router: " + "; ".join(dict.fromkeys(errors)) if errors
                      else None)
    return latency.round_trips(ddsperf.read(text, role, latency_test),
                               PRINTED.factor)


# what the engine that runs this program reads its logs with
PARSER = Parser("zenoh", parse, PRINTED)
