"""Engines by name. The runner never branches on an engine; it looks it up in the registry
built for its run (`registry(settings)`): nothing global, nothing changed in place."""

from __future__ import annotations

from k8sdds.engines.base import Command, Engine, RoleContext
from k8sdds.engines.ddsperf import Ddsperf
from k8sdds.engines.discovery import DdsDiscovery
from k8sdds.engines.mqtt import Mqtt
from k8sdds.engines.network import Ab, Iperf3, Ping, Qperf
from k8sdds.engines.rtiperftest import RtiPerftest, RtiSettings
from k8sdds.engines.zenoh import Zenoh
from k8sdds.engines.zenoh_discovery import ZenohDiscovery


def registry(rti: RtiSettings | None = None) -> dict[str, Engine]:
    """A fresh engine per name, for one run, in the order `k8sdds engines` lists them; `rti`
    says where the user's RTI Perftest is [from the environment]."""
    engines = (Ddsperf(), RtiPerftest(rti or RtiSettings.from_environment()), Zenoh(),
               Mqtt(), DdsDiscovery(), ZenohDiscovery(),
               Iperf3(), Qperf(), Ping(), Ab())
    return {e.name: e for e in engines}


def hubs() -> tuple[str, ...]:
    """The roles that take a node of their own, of every engine (a broker, a router)."""
    return tuple(dict.fromkeys(h for e in registry().values() for h in e.hubs))


def middlewares() -> tuple[str, ...]:
    """The engines that are pub/sub middlewares (the others measure the network itself)."""
    return tuple(n for n, e in registry().items() if e.middleware)


def line_facts() -> dict[str, tuple[bool, bool]]:
    """Per engine, what names its middleware lines: (it takes an MQTT QoS level, it runs
    more than one topology)."""
    return {n: (bool(e.qos_levels), len(e.topologies) > 1) for n, e in registry().items()}


def programs() -> tuple[str, ...]:
    """What k8sdds builds for the engines (engines/build, make perftest): the engine image
    carries them, `cluster engines` copies them."""
    return tuple(dict.fromkeys(p for e in registry().values() for p in e.programs))


__all__ = ["Command", "Engine", "RoleContext", "RtiSettings", "hubs", "line_facts",
           "middlewares", "programs", "registry"]
