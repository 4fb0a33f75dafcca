"""Engines by name. The runner never branches on an engine; it looks it up in the registry
built for its run (`registry(settings)`): nothing global, nothing changed in place."""

from __future__ import annotations

from k8sdds.perftest.base import Command, Engine, RoleContext
from k8sdds.perftest.ddsperf import Ddsperf
from k8sdds.perftest.mqtt import Mqtt
from k8sdds.perftest.network import Ab, Iperf3, Ping, Qperf
from k8sdds.perftest.rtiperftest import RtiPerftest, RtiSettings
from k8sdds.perftest.zenoh import Zenoh


def registry(rti: RtiSettings | None = None) -> dict[str, Engine]:
    """A fresh engine per name, for one run, in the order `k8sdds engines` lists them; `rti`
    says where the user's RTI Perftest is [from the environment]."""
    engines = (Ddsperf(), RtiPerftest(rti or RtiSettings.from_environment()), Zenoh(),
               Mqtt(),
               Iperf3(), Qperf(), Ping(), Ab())
    return {e.name: e for e in engines}


__all__ = ["Command", "Engine", "RoleContext", "RtiSettings", "registry"]
