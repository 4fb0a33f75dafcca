"""docs/architecture.md's list for a new engine, kept true: each engine of the registry lives
in a module of k8sdds/engines/ and names its parser, a module of k8sdds/parsers/ whose
`PARSER` it is; an engine that measures a latency carries its program's definition there
(`PRINTED`, `Parser.printed`)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from k8sdds import engines, parsers

ROOT = Path(__file__).parent.parent


def test_every_engine_lives_where_the_architecture_page_says():
    folder = Path(engines.__file__).parent
    known = engines.registry()
    # the engines k8sdds ships (k8sdds engines), written out
    assert set(known) == {"ddsperf", "rtiperftest", "zenoh", "mqtt", "dds-discovery",
                          "zenoh-discovery", "iperf3", "qperf", "ping", "ab"}
    for name, engine in known.items():
        assert Path(inspect.getfile(type(engine))).parent == folder, name
        module = importlib.import_module(f"k8sdds.parsers.{engine.parser.name}")
        assert module.PARSER is engine.parser and module.parse is engine.parser.parse, name
        assert Path(module.__file__).parent == Path(parsers.__file__).parent, name
        assert engine.parser.printed is getattr(module, "PRINTED", None), name
    # iperf3 measures no latency; the discovery engines time discovery
    timed = {n for n, e in known.items() if e.parser.printed is not None}
    assert set(known) - timed == {"iperf3", "dds-discovery", "zenoh-discovery"}
    page = (ROOT / "docs/architecture.md").read_text()
    for quoted in ("`engines.registry()`", "`Engine.parser`", "`PRINTED`"):
        assert quoted in page
