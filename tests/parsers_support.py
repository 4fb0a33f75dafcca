"""Each program's parser by its name, read from the engines' own records (an engine names
its parser: `Engine.parser`); for the tests that feed a parser a fixture."""

from __future__ import annotations

from k8sdds.engines import registry

PARSERS = {e.parser.name: e.parser.parse for e in registry().values()}
PRINTED = {e.parser.name: e.parser.printed for e in registry().values() if e.parser.printed}
