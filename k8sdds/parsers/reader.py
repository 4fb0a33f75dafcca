"""What an engine's record carries to read its program's logs (Parser): the pure function
from a log's text to values, the reader of a log a piece at a time where there is one, and
what the program prints as a latency (parsers.latency.Printed), each parser module's own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from k8sdds.parsers.base import Parsed
from k8sdds.parsers.latency import Printed


@dataclass(frozen=True)
class Parser:
    """One program's parser, as the engine that runs the program names it."""

    name: str  # the parser module's (k8sdds/parsers/<name>.py)
    parse: Callable[[str, str, bool], Parsed]  # (text, role, latency_test) -> Parsed
    printed: Printed | None = None  # its program's latency, where it prints one
    # reads a log a piece at a time (Stream(role, latency_test): feed(piece), result()):
    # its memory does not grow with a log's lines; None: the log is read whole
    stream: type | None = None
