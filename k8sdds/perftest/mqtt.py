"""MQTT through a real broker: Debian's `mosquitto`, and `k8sdds-mqtt` (engines/mqtt: a small
Go program on the Eclipse Paho client, built by `make engines`).

Roles: `pub` (the driver: a publisher at full speed or at pubRate, or the ping side of a
latency test), `broker` (mosquitto, on a node of its own where the cluster has one:
placement.place) and `sub0..` (subscribers counting, or the pong side). `bestEffort` picks
the QoS: true is QoS 0 (at most once), false QoS 1 (at least once); `mqttQos=2` asks for
exactly once (with bestEffort=false). MQTT runs over TCP: the
DDS columns it has no counterpart for (UDP, multicast, batching, DDS Security, a send queue,
a discovery mode) are refused with the reason, never ignored. Roles run `k8sdds-mqtt` by
name: the emulated backend puts the engines' directory first on their PATH, a host or an
image has it on its own.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from k8sdds.model import Test
from k8sdds.perftest.base import (
    Command,
    Problem,
    RoleContext,
    debian_version,
    engine_bin,
    engine_path,
    pubsub_roles,
)

BROKER = "broker"
PORT = 1883
BINARY = "k8sdds-mqtt"
MIN_SIZE = 16  # the sequence number and the send time
MAX_SIZE = 16 * 1024 * 1024  # under mosquitto's default message size limit (256 MiB)
PEER_WAIT = 10  # seconds the publisher waits for its subscribers (and they for the broker)


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


class Mqtt:
    name = "mqtt"
    supports = ("MQTT throughput, latency through a broker (mosquitto); tcp; QoS 0 "
                "(bestEffort), 1 and 2 (mqttQos)")
    parser = "mqtt"
    drain = 1.0  # seconds the subscribers get to count the last messages
    listen_port = PORT  # the broker (the first follower) listens before the driver starts
    parallel_streams = False
    topologies = ("routed",)  # always through its broker

    def check(self, test: Test) -> Problem:
        if not MIN_SIZE <= test.data_len <= MAX_SIZE:
            return ("data_len", test.data_len,
                    f"k8sdds-mqtt sends messages of {MIN_SIZE} to {MAX_SIZE} bytes")
        if test.transport != "tcp":
            return ("transport", test.transport, "MQTT runs over TCP; set transport=tcp")
        for field, value, why in (
                ("multicast", test.multicast, "MQTT has no multicast; set multicast=false"),
                ("batch_size", test.batch_size, "MQTT has no batching; set batchSize=0"),
                ("secure", test.secure, "MQTT has no DDS Security; set secure=false"),
                ("send_queue_size", test.send_queue_size,
                 "MQTT has no send queue setting; leave sendQueueSize empty or 0"),
                ("discovery", test.discovery,
                 "MQTT clients find each other through the broker; leave discovery empty")):
            if value:
                return (field, value, why)
        if test.mqtt_qos >= 0 and (test.mqtt_qos == 0) != test.best_effort:
            return ("mqtt_qos", test.mqtt_qos,
                    f"QoS {test.mqtt_qos} is {'best effort' if test.mqtt_qos == 0 else 'reliable'}"
                    f" but bestEffort={'true' if test.best_effort else 'false'}; QoS 0 goes with "
                    "bestEffort=true, QoS 1 and 2 with bestEffort=false")
        if test.latency_test and test.pub_rate:
            return ("pub_rate", test.pub_rate,
                    "a latency test sends one ping after each pong; set pubRate=0")
        return None

    def roles(self, test: Test) -> Sequence[str]:
        roles = pubsub_roles(test)
        return [roles[0], BROKER, *roles[1:]]

    def service_ports(self, test: Test) -> Sequence[tuple[int, str]]:
        return ()

    def secrets(self, test: Test, roles: Sequence[str], directory: str) -> None:
        return None

    def timeout(self, test: Test) -> float:
        return test.duration + 2 * PEER_WAIT + 10

    def command(self, test: Test, ctx: RoleContext) -> Command:
        if ctx.role == BROKER:
            name = "mosquitto.conf"
            return Command(("mosquitto", "-c", f"{ctx.config_dir}/{name}"),
                           files={name: broker_config()})
        driver = ctx.role == "pub"
        mode = ("ping" if driver else "pong") if test.latency_test else \
            ("pub" if driver else "sub")
        argv = [BINARY, "-mode", mode, "-broker", f"{ctx.endpoints[BROKER]}:{PORT}",
                "-topic", "k8sdds", "-size", str(test.data_len), "-qos", str(qos(test)),
                "-wait", str(PEER_WAIT), "-id", f"k8sdds-{ctx.role}"]
        if driver:
            argv += ["-duration", f"{test.duration:g}", "-peers", str(test.num_subscribers)]
            if test.pub_rate:
                argv += ["-rate", str(test.pub_rate)]
        return Command(tuple(argv))

    def unavailable(self) -> str | None:
        if shutil.which("mosquitto") is None:
            return ("mosquitto is not installed; install the Debian package mosquitto "
                    "(apt-get install mosquitto), or run `make install`")
        if shutil.which(BINARY, path=engine_path()) is None:
            return (f"{BINARY} is not built; run `make engines` (needs Go), which puts it in "
                    f"{engine_bin()}")
        return None

    def version(self) -> str:
        try:
            out = subprocess.run([shutil.which(BINARY, path=engine_path()) or BINARY,
                                  "-version"], capture_output=True, text=True,
                                 timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        return f"mosquitto {debian_version('mosquitto')}, {out or BINARY}"
