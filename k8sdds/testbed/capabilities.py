"""What this kernel offers the emulated testbed, detected by trying, never assumed."""

from __future__ import annotations

import functools
import os
import secrets
import shutil

from k8sdds.testbed.netns import run

_PROBE_ARGS = {"vxlan": ["id", "1", "dstport", "4789"]}


def _probe(what: str, argv: list[str]) -> str | None:
    """Run `argv` (with {ns} for a scratch namespace); None if it worked, else why not."""
    if os.geteuid() != 0:
        return "needs root to probe"
    ns = f"k8sdds-probe-{secrets.token_hex(3)}"
    if run(["ip", "netns", "add", ns], check=False).returncode != 0:
        return "cannot create a network namespace"
    try:
        proc = run([a.format(ns=ns) for a in argv], check=False)
        if proc.returncode == 0:
            return None
        return f"the kernel has no {what} ({proc.stderr.strip() or 'refused'})"
    finally:
        run(["ip", "netns", "del", ns], check=False)


@functools.cache
def link_type(kind: str) -> str | None:
    """None if the kernel can create a `kind` link, else why not (one line)."""
    return _probe(f"{kind} link type", ["ip", "-n", "{ns}", "link", "add", "probe0", "type",
                                        kind, *_PROBE_ARGS.get(kind, [])])


@functools.cache
def wireguard() -> tuple[str | None, str | None]:
    """(how WireGuard is provided here: "kernel" or "wireguard-go", or None; why not)."""
    if link_type("wireguard") is None and shutil.which("wg"):
        return "kernel", None
    missing = [tool for tool in ("wireguard-go", "wg") if shutil.which(tool) is None]
    if missing:
        return None, ("no kernel WireGuard and no " + " or ".join(missing) +
                      " (apt-get install --no-install-recommends wireguard-go wireguard-tools)")
    if not os.path.exists("/dev/net/tun"):
        return None, "no kernel WireGuard, and wireguard-go needs /dev/net/tun"
    return "wireguard-go", None


@functools.cache
def qdisc(kind: str) -> str | None:
    """None if the kernel has the `kind` queueing discipline (netem, ...), else why not."""
    return _probe(f"{kind} qdisc", ["tc", "-n", "{ns}", "qdisc", "add", "dev", "lo", "root",
                                    kind])


@functools.cache
def threaded_napi() -> str | None:
    """None if a node's kernel datapath work can be charged to it (threaded NAPI, and
    ethtool to give a veth GRO), else why not."""
    if shutil.which("ethtool") is None:
        return "ethtool is not installed (apt-get install ethtool)"
    if not os.path.exists("/sys/class/net/lo/threaded"):
        return "the kernel has no threaded NAPI (/sys/class/net/*/threaded, Linux 5.12+)"
    return None
