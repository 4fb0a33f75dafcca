"""Pure functions from an engine's output text to values, a module per program. An engine's
record names its program's parser (`Engine.parser`, a `reader.Parser`: its `parse`, a reader
of a log a piece at a time where there is one, and its latency definition); there is no
registry of them by name."""

from __future__ import annotations

from k8sdds.parsers.base import SAMPLE, SUMMARY, Parsed, Trace, Value

__all__ = ["SAMPLE", "SUMMARY", "Trace", "Parsed", "Value"]
