"""The options of a run, declared once: `k8sdds run`'s (ScheduleFlags) and `k8sdds
baseline`'s (Matrix). The CLI makes their `--flags` from these fields, the service its task
fields, and a request file is checked against them (`checked`): one set of names, types and
bounds."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from k8sdds import baseline, model
from k8sdds.errors import UserError
from k8sdds.flags import option
from k8sdds.order import ORDERS
from k8sdds.schedule import BOUNDS  # the schedule's own columns take the same bounds

_DURATION = {"min": BOUNDS["duration"][0], "max": BOUNDS["duration"][1]}
_REPEATS = {"min": BOUNDS["repeats"][0], "max": BOUNDS["repeats"][1]}


@dataclass(frozen=True)
class ScheduleFlags:
    """`k8sdds run`: how the schedule's tests run (None and False: the row's own value, else
    the column's default)."""

    datapath: str | None = option(
        None, "--datapath", "comma-separated datapaths; the schedule runs once per datapath, "
        "into one run directory [emulated: host; kubernetes: the cluster's own]: "
        + ", ".join(model.DATAPATHS))
    duration: float | None = option(None, "--duration", "seconds each test runs (rows "
                                    "without a duration) [10]", cli_type=float, **_DURATION)
    repeats: int | None = option(None, "--repeats", "repeats of each test (rows without "
                                 "repeats) [1: each change is shown with no verdict; 3 or "
                                 "more give each an interval and a verdict]", cli_type=int,
                                 **_REPEATS)
    from_i: int | None = option(None, "--fromI", "first schedule row to run (0-based, "
                                "inclusive)", cli_type=int, min=0)
    to_i: int | None = option(None, "--toI", "last schedule row to run (0-based, inclusive)",
                              cli_type=int, min=0)
    latency_test: bool = option(False, "--latencyTest", "latency (ping-pong) tests instead "
                                "of throughput", cli_type=bool)
    engine: str | None = option(
        None, "--engine", "engine of the rows without their own (`k8sdds engines` lists them; "
        "the K8sDDS study measured with rtiperftest) [ddsperf]")
    transport: str | None = option(
        None, "--transport", "udp, tcp, tls or dtls (case-insensitive; ddsperf: udp, tcp and "
        "tls, with a CA and certificates made for the run)")
    secure: bool = option(False, "--secure", "DDS Security: authentication, access control "
                          "and encryption (ddsperf: Cyclone's plugins, credentials made for "
                          "the run)", cli_type=bool)
    peers: bool = option(False, "--peers", "discover by unicast peers even where multicast "
                         "would work", cli_type=bool)
    send_queue_size: int | None = option(
        None, "--sendQueueSize", "writer queue in samples (ddsperf: Cyclone's WhcHigh = this "
        "x dataLen bytes)", cli_type=int, min=0, max=10**7)
    no_print: bool = option(False, "--noPrint", "accepted for K8sDDS; ddsperf always prints "
                            "intervals", cli_type=bool)
    strict: bool = option(
        False, "--strict", "refuse the whole schedule when one of the run's datapaths cannot "
        "carry a row (multicast across nodes on a routed datapath); without it such a row is "
        "left out on that datapath, said before the run and kept in the manifest",
        cli_type=bool)
    order: str | None = option(
        None, "--order", "the order repeats run in. rounds: the first repeat of every test, "
        "then the second, ..., so a slow stretch of the machine falls on every test alike "
        "and drift does not pass for a datapath's cost; tests: each test's repeats in a row "
        "(K8sDDS's order) [rounds; on --resume: the run's own]: " + ", ".join(ORDERS))

    def defaults(self) -> model.Defaults:
        """The values rows without their own take (the transport is checked by the request)."""
        return model.Defaults(
            engine=self.engine, latency_test=self.latency_test or None, secure=self.secure or None,
            duration=self.duration, repeats=self.repeats,
            send_queue_size=self.send_queue_size,
            discovery="peers" if self.peers else None, no_print=self.no_print or None)


@dataclass(frozen=True)
class Matrix:
    """`k8sdds baseline`: the network engines, and ddsperf with `dds`, over the paths of each
    datapath; the run's schedule is made from it once the backend says what it offers."""

    datapath: str | None = option(
        None, "--datapath", "comma-separated datapaths; the matrix runs on each [emulated: "
        "host, flannel-hostgw, flannel-vxlan; kubernetes: host and the cluster's own]")
    paths: str = option("all", "--paths", "all (what the backend offers), or "
                        "comma-separated: " + ", ".join(model.PATHS) + " (a host-network "
                        "datapath has only node-node; pod-service and external-nodeport, "
                        "through a Service, on kubernetes only)")
    engines: str = option(",".join(baseline.ENGINES), "--engines", "comma-separated: "
                          + ", ".join(baseline.ENGINES))
    dds: bool = option(True, "--dds/--no-dds", "also run ddsperf (1 KiB throughput, 64 B "
                       "round trip) on every path, for the report's DDS efficiency",
                       cli_type=bool)
    duration: float = option(5.0, "--duration", "seconds per test (ddsperf tests: at least "
                             f"{baseline.DDS_MIN_DURATION:g}, its first second is discovery)",
                             cli_type=float, **_DURATION)
    repeats: int = option(1, "--repeats", "repeats per test", cli_type=int, **_REPEATS)


KINDS: dict[str, type] = {"schedule": ScheduleFlags, "baseline": Matrix}


def _typed(cli_type: type, value: Any) -> bool:
    if cli_type is bool:
        return isinstance(value, bool)
    if cli_type is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if cli_type is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) \
            and value == value and abs(value) != float("inf")
    return isinstance(value, str) and "\x00" not in value and (
        cli_type is not Path or value.startswith("/"))


def checked(cls: type, given: dict[str, Any], where: str) -> dict[str, Any]:
    """The values of `given` (field -> value, JSON's types) that `cls` declares, each of the
    field's type and within its bounds; anything else is a UserError naming `where`, the
    field, the value and what is allowed."""
    declared = {f.name: f for f in fields(cls)}
    out = {}
    for name, value in given.items():
        if name not in declared:
            raise UserError(f"{where}: {name!r} is not an option here; allowed: "
                            f"{', '.join(declared)}")
        if value is None:
            continue
        meta = declared[name].metadata
        kind, bounds = meta["cli_type"], meta["bounds"]
        low, high = bounds.get("min"), bounds.get("max")
        if not _typed(kind, value) or (low is not None and value < low) or (
                high is not None and value > high):
            span = "" if low is None and high is None else " from {} to {}".format(
                "-inf" if low is None else low, "inf" if high is None else high)
            allowed = {bool: "true or false", int: "a whole number", float: "a number",
                       Path: "an absolute path"}.get(kind, "text")
            raise UserError(f"{where}: {name} = {value!r} is not allowed; allowed: "
                            f"{allowed}{span}")
        out[name] = value
    return out
