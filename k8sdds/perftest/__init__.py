"""Engines by name. The runner never branches on an engine; it looks it up here."""

from __future__ import annotations

from k8sdds.perftest.base import Command, Engine, RoleContext
from k8sdds.perftest.ddsperf import Ddsperf
from k8sdds.perftest.network import Ab, Iperf3, Ping, Qperf
from k8sdds.perftest.rtiperftest import RtiPerftest

ENGINES: dict[str, Engine] = {e.name: e for e in (Ddsperf(), RtiPerftest(), Iperf3(), Qperf(),
                                                  Ping(), Ab())}

__all__ = ["ENGINES", "Command", "Engine", "RoleContext"]
