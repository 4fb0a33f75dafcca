"""A node's uplink as a profile shapes it: netem (delay, loss) and tbf (rate, bucket) on
one end of the link, with netem at the root and the tbf under it where both apply."""

from __future__ import annotations

from k8sdds.testbed import capabilities, netns
from k8sdds.testbed.profiles import Profile


def wants_netem(profile: Profile) -> bool:
    """Whether `profile` has delay or loss (netem's work)."""
    return bool(profile.delay_ms or profile.loss_pct)


def netem_applies(profile: Profile) -> bool:
    """Whether `profile` has delay or loss and this kernel can apply them."""
    return wants_netem(profile) and capabilities.qdisc("netem") is None


def add_netem(ns: str, dev: str, profile: Profile) -> None:
    netns.run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:",
               "netem", "delay", f"{profile.delay_ms or 0}ms", "loss",
               f"{profile.loss_pct or 0}%"])


def shape(ns: str, dev: str, rate_mbit: float, burst_kb: int, under_netem: bool) -> None:
    """The link rate on one end of an uplink (replacing the one there, if any)."""
    parent = ["parent", "1:1", "handle", "10:"] if under_netem else ["root"]
    netns.run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, *parent, "tbf", "rate",
               f"{rate_mbit:g}mbit", "burst", f"{burst_kb}kb", "latency", "50ms"])
