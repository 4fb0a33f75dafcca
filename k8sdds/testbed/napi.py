"""A node's kernel datapath work charged to the node's CPU budget.

On a real node, receive processing (bridge, routing, VXLAN decapsulation, socket delivery)
runs in softirq on the node's own CPUs, and the sending side's (routing, encapsulation) in the
sender's system call. On the emulated cluster every node shares one kernel. What a node sends
is processed in the sending process's system call already, charged to the node it belongs
to, down to the node's uplink. What arrives from the switch would be processed wherever the
kernel happens to be (the switch's, or the sending node's, context). So the uplink `eth0` of
each limited node, and each switch port, gets threaded NAPI (`/sys/class/net/DEV/threaded`):
a node's receive work runs in a kernel thread of its own, `napi/eth0-ID`, which joins the
node's cgroup; a switch port's thread joins none (the switch is hardware). What the uplink's
poll raises on the way (a VXLAN device's GRO cell, a pod's veth, whose receive queue is the
plain backlog) runs when the poll re-enables bottom halves, in the same thread. Pods' veths are
not threaded: a thread per hop would add a context switch a real node does not have.

A veth polls with NAPI only with GRO on, and only takes packets that its sender could not
have segmented in hardware: the uplinks of limited nodes have TCP segmentation offload off,
as a Raspberry Pi's USB Ethernet (LAN9514) has none.

The threads of a namespace are found through the kernel's `netdev` generic netlink family
(NAPI_GET: interface, NAPI id, thread pid), asked from inside the namespace.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from k8sdds.errors import TestbedError
from k8sdds.testbed import cgroups, netns
from k8sdds.testbed.netns import enter

# netlink and generic netlink constants (linux/netlink.h, genetlink.h, netdev.h)
NETLINK_GENERIC = 16
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
NETDEV_CMD_NAPI_GET = 11
NETDEV_A_NAPI_IFINDEX = 1
NETDEV_A_NAPI_ID = 2
NETDEV_A_NAPI_PID = 4

OFFLOADS = ("tso", "off", "gro", "on")  # no segmentation offload; GRO makes veth use NAPI


@dataclass(frozen=True)
class Napi:
    """One NAPI instance of an interface, and the kernel thread that polls it (0: none)."""

    ifindex: int
    id: int
    pid: int


# ---- pure: netlink messages --------------------------------------------------------------
def attribute(kind: int, data: bytes) -> bytes:
    """One netlink attribute, padded to 4 bytes."""
    length = 4 + len(data)
    return struct.pack("=HH", length, kind) + data + b"\0" * (-length % 4)


def attributes(buf: bytes) -> dict[int, bytes]:
    """The attributes of a message body, by type (the last of a repeated type wins)."""
    out, i = {}, 0
    while i + 4 <= len(buf):
        length, kind = struct.unpack_from("=HH", buf, i)
        if length < 4:
            break
        out[kind & 0x3FFF] = buf[i + 4:i + length]
        i += (length + 3) & ~3
    return out


def genl_message(family: int, flags: int, cmd: int, body: bytes, seq: int) -> bytes:
    """A generic netlink request: netlink header, genl header (version 1), attributes."""
    payload = struct.pack("=BBH", cmd, 1, 0) + body
    return struct.pack("=IHHII", 16 + len(payload), family, flags, seq, 0) + payload


def split_messages(data: bytes) -> tuple[list[dict[int, bytes]], bool]:
    """The attribute sets of the genl messages in one read, and whether the reply ended
    (DONE, or the acknowledgement of a single request). A netlink error raises OSError."""
    out, i = [], 0
    while i + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, i)
        if kind == NLMSG_DONE:
            return out, True
        if kind == NLMSG_ERROR:
            err = struct.unpack_from("=i", data, i + 16)[0]
            if err:
                raise OSError(-err, os.strerror(-err))
            return out, True
        out.append(attributes(data[i + 20:i + length]))  # after nlmsghdr + genlmsghdr
        i += (length + 3) & ~3
    return out, False


def napis(messages: Iterable[dict[int, bytes]]) -> list[Napi]:
    """NAPI_GET replies as Napi records."""
    def number(msg: dict[int, bytes], kind: int) -> int:
        return int.from_bytes(msg.get(kind, b""), "little")

    return [Napi(number(m, NETDEV_A_NAPI_IFINDEX), number(m, NETDEV_A_NAPI_ID),
                 number(m, NETDEV_A_NAPI_PID)) for m in messages]


# ---- I/O -----------------------------------------------------------------------------------
def _ask(sock: socket.socket, message: bytes, single: bool) -> list[dict[int, bytes]]:
    sock.send(message)
    out: list[dict[int, bytes]] = []
    while True:
        got, done = split_messages(sock.recv(1 << 16))
        out += got
        if done or (single and got):
            return out


def _dump_here() -> list[Napi]:
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC) as sock:
        reply = _ask(sock, genl_message(GENL_ID_CTRL, NLM_F_REQUEST, CTRL_CMD_GETFAMILY,
                                        attribute(CTRL_ATTR_FAMILY_NAME, b"netdev\0"), 1),
                     single=True)
        family = int.from_bytes(reply[0][CTRL_ATTR_FAMILY_ID], "little")
        return napis(_ask(sock, genl_message(family, NLM_F_REQUEST | NLM_F_DUMP,
                                             NETDEV_CMD_NAPI_GET, b"", 2), single=False))


def threads(ns: str) -> list[Napi]:
    """Every NAPI instance in namespace `ns`, asked from a thread that enters it (a
    netlink socket belongs to the namespace it was opened in)."""
    result: dict[str, object] = {}

    def inside() -> None:
        try:
            enter(f"/run/netns/{ns}")  # this thread only: setns moves the calling thread
            result["napis"] = _dump_here()
        except OSError as exc:
            result["error"] = exc

    worker = threading.Thread(target=inside, name=f"napi-{ns}")
    worker.start()
    worker.join()
    if "error" in result:
        raise TestbedError(f"cannot list the NAPI threads of {ns}: {result['error']}")
    return result["napis"]  # type: ignore[return-value]


def thread_devices(ns: str, devices: Iterable[str]) -> None:
    """Give each veth of `devices` in `ns` the edge NIC's offloads and threaded NAPI."""
    for dev in devices:
        netns.run(netns.exec_argv(ns, ["ethtool", "-K", dev, *OFFLOADS]))
        netns.run(netns.exec_argv(ns, ["tee", f"/sys/class/net/{dev}/threaded"]), stdin="1")


CHARGE_TRIES = 5  # listings of a namespace's threads before a refused move is an error
CHARGE_PAUSE = 0.2  # seconds between them: a thread the kernel is still setting up refuses


def charge(ns: str, cgroup: str | None) -> list[int]:
    """Move the NAPI threads of namespace `ns` into `cgroup`; return their pids. A move the
    kernel refuses is tried again on a fresh listing, since a thread can end between the
    listing and the move (a device's NAPI re-made) and its pid be another task's or none.
    The refusal seen (EINVAL, twice in about 2,000 tests of CI-like runs, 2026-11-28 and -29,
    both when three immediate tries were all) is not explained: cgroup v1 refuses a task it
    may not migrate yet, so the tries are spread over a second; a refusal that outlasts them
    is a TestbedError naming the thread."""
    for attempt in range(CHARGE_TRIES):
        if attempt:
            time.sleep(CHARGE_PAUSE)  # the kernel's state, not an event: nothing to wait on
        pids = sorted({n.pid for n in threads(ns) if n.pid})
        refused = _refused(cgroup, pids) if cgroup else []
        if not refused:
            return pids
    pid, exc = refused[0]
    raise TestbedError(f"cannot move the NAPI thread {pid} ({netns.command(pid) or 'ended'}) "
                       f"of {ns} into {cgroup}: {exc.strerror or exc}")


def _refused(cgroup: str, pids: list[int]) -> list[tuple[int, OSError]]:
    """Move each of `pids` into `cgroup` (again for one there already: no change); the moves
    the kernel refused, with its reason."""
    refused = []
    for pid in pids:
        try:
            cgroups.join(cgroup, pid)
        except OSError as exc:
            refused.append((pid, exc))
    return refused
