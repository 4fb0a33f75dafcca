"""MQTT through a real broker: Debian's `mosquitto`, and `k8sdds-mqtt` (engines/mqtt: a small
Go program on the Eclipse Paho client, built by `make engines`).

Roles: `pub` (the driver: a publisher at full speed or at pubRate, or the ping side of a
latency test), `broker` (mosquitto, on a node of its own where the cluster has one:
placement.place) and `sub0..` (subscribers counting, or the pong side); under load, `stream`
and `sink` on a topic of their own through the same broker (clients.OwnClient.measured).
`bestEffort` picks the QoS: true is QoS 0 (at most once), false QoS 1 (at least once);
`mqttQos=2` asks for exactly once (with bestEffort=false). MQTT runs over TCP: the
DDS columns it has no counterpart for (UDP, multicast, batching, DDS Security, a send queue,
a discovery mode) are refused with the reason, never ignored. Roles run `k8sdds-mqtt` by
name: the emulated backend puts the engines' directory first on their PATH, a host or an
image has it on its own.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence

from k8sdds.engines.base import Command, Problem, RoleContext, debian_version, pubsub_roles
from k8sdds.engines.clients import DRIVERS, PEER_WAIT, OwnClient, built, first_line, not_built
from k8sdds.model import SINK, STREAM, Test
from k8sdds.parsers.mqtt import (
    BROKER,  # the role name its log is parsed by
    PARSER,
)

PORT = 1883
BINARY = "k8sdds-mqtt"


def qos(test: Test) -> int:
    """The MQTT QoS of a test: its mqttQos, else best effort QoS 0 and reliable QoS 1."""
    if test.mqtt_qos >= 0:
        return test.mqtt_qos
    return 0 if test.best_effort else 1


def broker_config() -> str:
    """mosquitto's configuration: one plain listener, nothing kept on disk, queues deep
    enough that a QoS 1 subscriber falling behind is slowed, not dropped, and Nagle's
    algorithm off (mosquitto leaves it on by default; with it, a PUBACK waiting on a delayed
    ACK made every QoS 1 round trip 44 ms), as the clients have it."""
    return (f"listener {PORT} 0.0.0.0\nallow_anonymous true\npersistence false\n"
            "set_tcp_nodelay true\nmax_queued_messages 1000000\nmax_inflight_messages 64\n"
            "log_dest stdout\nlog_type error\nlog_type warning\nlog_type notice\n")


class Mqtt(OwnClient):
    name = "mqtt"
    binary = BINARY
    programs = (BINARY,)  # mosquitto is Debian's, for every architecture
    hubs = (BROKER,)
    qos_levels = (0, 1, 2)
    arches = ("amd64", "arm64", "armhf")  # Go: this machine's, a Pi 4/5's and a Pi 3's
    supports = ("MQTT throughput, latency, latency under load through a broker (mosquitto); "
                "tcp; QoS 0 (bestEffort), 1 and 2 (mqttQos)")
    parser = PARSER
    listen_port = PORT  # the broker (the first follower) listens before the driver starts
    topologies = ("routed",)  # always through its broker

    transport_why = "MQTT runs over TCP; set transport=tcp"
    refusals = (
        ("multicast", "MQTT has no multicast; set multicast=false"),
        ("batch_size", "MQTT has no batching; set batchSize=0"),
        ("secure", "MQTT has no DDS Security; set secure=false"),
        ("send_queue_size", "MQTT has no send queue setting; leave sendQueueSize empty or 0"),
        ("discovery", "MQTT clients find each other through the broker; leave discovery empty"))

    def own_problem(self, test: Test) -> Problem:
        if test.mqtt_qos >= 0 and (test.mqtt_qos == 0) != test.best_effort:
            return ("mqtt_qos", test.mqtt_qos,
                    f"QoS {test.mqtt_qos} is {'best effort' if test.mqtt_qos == 0 else 'reliable'}"
                    f" but bestEffort={'true' if test.best_effort else 'false'}; QoS 0 goes with "
                    "bestEffort=true, QoS 1 and 2 with bestEffort=false")
        return None

    def roles(self, test: Test) -> Sequence[str]:
        roles = pubsub_roles(test)
        return [roles[0], BROKER, *roles[1:]] + ([STREAM, SINK] if test.load else [])

    def command(self, test: Test, ctx: RoleContext) -> Command:
        if ctx.role == BROKER:
            name = "mosquitto.conf"
            return Command(("mosquitto", "-c", f"{ctx.config_dir}/{name}"),
                           files={name: broker_config()})
        test, topic = self.measured(test, ctx.role, ctx.stream_rate)
        argv = [BINARY, "-mode", self.mode(test, ctx.role),
                "-broker", f"{ctx.endpoints[BROKER]}:{PORT}", "-topic", topic,
                "-size", str(test.data_len), "-qos", str(qos(test)),
                "-wait", str(PEER_WAIT), "-id", f"k8sdds-{ctx.role}"]
        if ctx.role in DRIVERS:
            argv += self.driver_flags(test)
        return Command(tuple(argv))

    def unavailable(self) -> str | None:
        if shutil.which("mosquitto") is None:
            return ("mosquitto is not installed; install the Debian package mosquitto "
                    "(apt-get install mosquitto), or run `make install`")
        return None if built(BINARY) else not_built(BINARY, "Go")

    def version(self) -> str:
        return f"mosquitto {debian_version('mosquitto')}, {first_line(BINARY, '-version')}"
