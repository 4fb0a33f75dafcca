"""docs/architecture.md's list for a new engine, kept true: each engine of the registry lives
in a module of k8sdds/engines/, its parser in k8sdds/parsers/ is in parsers.PARSERS, and an
engine that measures a latency has its definition in parsers.latency.PRINTED."""

from __future__ import annotations

import inspect
from pathlib import Path

from k8sdds import engines, parsers
from k8sdds.parsers import latency

ROOT = Path(__file__).parent.parent


def test_every_engine_lives_where_the_architecture_page_says():
    folder = Path(engines.__file__).parent
    known = engines.registry()
    # the engines k8sdds ships (k8sdds engines), written out
    assert set(known) == {"ddsperf", "rtiperftest", "zenoh", "mqtt", "dds-discovery",
                          "zenoh-discovery", "iperf3", "qperf", "ping", "ab"}
    for name, engine in known.items():
        assert Path(inspect.getfile(type(engine))).parent == folder, name
        parse = parsers.PARSERS[engine.parser]
        assert Path(inspect.getfile(parse)).parent == Path(parsers.__file__).parent, name
    # iperf3 measures no latency; the discovery engines time discovery
    timed = {n for n, e in known.items() if e.parser in latency.PRINTED}
    assert set(known) - timed == {"iperf3", "dds-discovery", "zenoh-discovery"}
    page = (ROOT / "docs/architecture.md").read_text()
    for quoted in ("`engines.registry()`", "`parsers.PARSERS`", "`parsers.latency.PRINTED`"):
        assert quoted in page
