"""Edge node profiles: link rate and burst (tbf), CPU budget (cgroup), MTU, delay and loss
(netem, where the kernel has it).

Where each number comes from (`k8sdds testbed profiles` shows it):

* `rpi3b`: Raspberry Pi 3 Model B, the workers of the K8sDDS study. Its Ethernet is 10/100
  (LAN9514 on USB 2.0), so the uplink is 100 Mbit/s, with no segmentation offload. Its CPU
  budget is **calibrated** (k8sdds.testbed.calibration): the share of one of this machine's
  CPUs at which the emulated node's host network shows the board's published host figures.
* `rpi4`: Raspberry Pi 4 Model B: Gigabit Ethernet (1000 Mbit/s). Its CPU is an estimate:
  twice the Pi 3B's calibrated budget (Cortex-A72 at 1.5 GHz against Cortex-A53 at 1.2 GHz);
  k8sdds has no published host figures of this board to calibrate on.
* `rpi3b-armhf`: a Pi 3B that runs its own programs: the armhf builds of Debian's engines
  (and of Perftest, where `make perftest` built it for armhf) under qemu-user, inside the
  node's namespace and cgroup (k8sdds.testbed.userspace), as the K8sDDS study's Pis ran
  32-bit Raspberry Pi OS. User space then costs what ARM code costs and the kernel what it
  costs here, so its CPU budget is its own calibration (`board` rpi3b-armhf, about a third of
  a CPU where rpi3b's is about 0.09): such a node holds a third of a core, and a machine holds
  few of them (a run refuses a test whose nodes need more). Discovery goes by peers
  (qemu-user refuses multicast's socket option).
* `rpi3b-wifi`: a Pi 3B on its 2.4 GHz 802.11n radio: about 40 Mbit/s in practice, 2 ms of
  delay and 0.1 % loss (needs netem; where the kernel lacks it, the profile says so); the
  Pi 3B's CPU budget.
* `cloud`: no limits (the machine as it is).

A profile also says whether the board's CPU has AES instructions (`aes`). Neither Pi does:
the BCM2837 (3B) and BCM2711 (4B) ship their Cortex-A53 and -A72 without the ARMv8
cryptography extensions, so their OpenSSL runs AES in software. The emulated backend gives
the engines of such a node an environment that keeps OpenSSL off this machine's AES
instructions (`engine_env`), so TLS and DDS Security cost what they cost on the board.

The burst of each tbf is at least the rate divided by 100 (10 ms of traffic at line rate),
so the rate holds with a 100 Hz timer; on a node with a CPU budget, at least
`BURST_PERIODS` of its cgroup's enforcement periods at line rate (see `link_burst_kb`).
"""

from __future__ import annotations

import math
import platform
from dataclasses import dataclass, field, replace

from k8sdds.testbed.cgroups import period_us

BURST_PERIODS = 4  # tbf bucket, in CPU enforcement periods at line rate (link_burst_kb)


@dataclass(frozen=True)
class Profile:
    name: str
    rate_mbit: float | None = None  # node uplink rate, both directions
    burst_kb: int = 0
    cpu: float | None = None  # CPUs (cores) for the node and all its pods
    mtu: int | None = None  # node uplink MTU
    delay_ms: float | None = None  # netem
    loss_pct: float | None = None  # netem
    about: str = ""
    board: str | None = None  # the calibrated board whose CPU budget this profile uses
    cpu_scale: float = 1.0  # times that board's budget
    cpu_from: str = ""  # where `cpu` comes from (filled by resolve())
    cpu_when: str = ""  # when that calibration was made (ISO 8601; filled by resolve())
    cpu_origin: str = ""  # what `cpu_from` rests on: NO_LIMIT ... ELSEWHERE below (resolve())
    cpu_away: str = ""  # why that calibration does not hold on this machine, if it does not
    cpu_pace: float | None = None  # this machine's loopback rate now over the calibration's
    aes: bool = True  # the board's CPU has AES instructions (else engine_env masks them)
    hop_rules: dict = field(default_factory=dict)  # pod datapath -> the idle rules each of
    # its packets crosses at the node's uplink (k8sdds.testbed.hopcost): the kernel's share
    # at the board's pace, from the board's calibration (filled by resolve())
    program_arch: str = ""  # the Debian architecture of the board's own programs, which its
    # nodes run under qemu-user (k8sdds.testbed.userspace); "": this machine's programs


# What a profile's CPU budget rests on (Profile.cpu_origin), for what the emulator says it
# cannot show: no budget, set by hand, a guess, calibrated here or on the release machine.
NO_LIMIT, BY_HAND, GUESS, HERE, RELEASE = "none", "hand", "guess", "this machine", "release"
ELSEWHERE = "another machine"  # this machine's calibration file, made on another machine


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("cloud", about="no limits"),
        Profile("rpi3b", rate_mbit=100, burst_kb=128, cpu=0.5, board="rpi3b",
                aes=False, about="Raspberry Pi 3B: 100 Mbit/s Ethernet, calibrated CPU"),
        Profile("rpi4", rate_mbit=1000, burst_kb=1280, cpu=1.0, board="rpi3b", cpu_scale=2.0,
                aes=False, about="Raspberry Pi 4B: 1 Gbit/s Ethernet, twice the Pi 3B's CPU"),
        Profile("rpi3b-armhf", rate_mbit=100, burst_kb=128, cpu=0.35, board="rpi3b-armhf",
                aes=False, program_arch="armhf",
                about="Raspberry Pi 3B running its own armhf programs (32-bit Raspberry Pi "
                      "OS, as the K8sDDS study's Pis) under qemu-user: 100 Mbit/s "
                      "Ethernet, calibrated CPU"),
        Profile("rpi3b-wifi", rate_mbit=40, burst_kb=64, cpu=0.5, delay_ms=2, loss_pct=0.1,
                board="rpi3b", aes=False,
                about="Raspberry Pi 3B on 2.4 GHz Wi-Fi: 40 Mbit/s, 2 ms, 0.1 % loss"),
    )
}


def resolve(name: str) -> Profile:
    """Profile `name` with its CPU budget from the calibration of its board (this machine's,
    else the release machine's), where that budget came from, and the link bucket it needs."""
    p = _budget(PROFILES[name])
    return replace(p, burst_kb=link_burst_kb(p.rate_mbit, p.burst_kb, p.cpu))


def _budget(p: Profile) -> Profile:
    from k8sdds.testbed import calibration

    if p.cpu is None:
        return replace(p, cpu_from="no limit", cpu_origin=NO_LIMIT)
    if p.board is None:
        return replace(p, cpu_from=p.cpu_from or "set by hand", cpu_origin=BY_HAND)
    found = calibration.load(p.board)
    if found is None:
        return replace(p, cpu_from=f"not calibrated: a guess; run `k8sdds testbed calibrate "
                                   f"--profile {p.board}`", cpu_origin=GUESS)
    cal, reference = found
    scale = "" if p.cpu_scale == 1 else f"{p.cpu_scale:g} x the {p.board} budget, "
    away = calibration.elsewhere(cal.machine, calibration.this_machine())
    origin = HERE if away is None else RELEASE if reference else ELSEWHERE
    return replace(p, cpu=round(cal.cpu * p.cpu_scale, 4), hop_rules=cal.path_rules(),
                   cpu_from=scale + cal.describe(reference)
                   + (f"; not this machine: {away}" if away else ""),
                   cpu_when=cal.when, cpu_origin=origin, cpu_away=away or "",
                   cpu_pace=calibration.pace(cal.machine, calibration.this_machine()))


def link_burst_kb(rate_mbit: float | None, burst_kb: int, cpu: float | None) -> int:
    """The tbf bucket (KiB) of a node's link: the profile's own, and at least BURST_PERIODS
    of the node's CPU enforcement periods at line rate.

    Why: a node under a CPU budget does not send evenly, as the board does; it sends a
    whole period's traffic within its quota's slice, then waits. A bucket smaller than that
    made a CPU-bound node look link-bound: the tail of each slice queued in the tbf, and the
    tbf's timer sent it later, charged to whatever task it interrupted rather than to the
    node. Repeats then ran in one mode or the other (docs/explanation/fidelity.md)."""
    if not rate_mbit or not cpu:
        return burst_kb
    window_s = BURST_PERIODS * period_us(cpu) / 1e6
    return max(burst_kb, math.ceil(rate_mbit * 1e6 / 8 * window_s / 1024))


# OpenSSL's capability masks that hide the AES instructions, by this machine's architecture:
# x86: AES-NI (CPUID.1:ECX bit 25) and PCLMULQDQ (bit 1), which AES-GCM's fast path needs,
# in the ECX half of OPENSSL_ia32cap; 64- and 32-bit ARM (a board's own programs under qemu-user
# included): NEON only, without the ARMv8 AES, SHA and PMULL (OPENSSL_armcap's bits are one).
NO_AES_ENV: dict[str, dict[str, str]] = {
    "x86_64": {"OPENSSL_ia32cap": "~0x200000200000000"},
    "aarch64": {"OPENSSL_armcap": "0x1"},
    "armv7l": {"OPENSSL_armcap": "0x1"},
}


def engine_env(profile: Profile, machine: str | None = None) -> dict[str, str]:
    """The environment an engine on a node of `profile` runs with: on a board without AES
    instructions, OpenSSL kept off this machine's (where k8sdds knows the mask for it)."""
    if profile.aes:
        return {}
    return dict(NO_AES_ENV.get(machine or program_machine(profile), {}))


def program_machine(profile: Profile) -> str:
    """What `uname -m` says where the node's programs run: the board's, under qemu-user."""
    from k8sdds.testbed.userspace import MACHINE

    return MACHINE.get(profile.program_arch, platform.machine())


def not_emulated(profile: Profile, machine: str | None = None) -> str | None:
    """What of `profile` this machine cannot emulate in the engines (None: all of it)."""
    machine = machine or program_machine(profile)
    if not profile.aes and machine not in NO_AES_ENV:
        return (f"software AES: k8sdds has no OpenSSL mask for {machine}, so encrypted "
                "transports use this machine's AES instructions")
    return None
