"""Edge node profiles: link rate and burst (tbf), CPU quota (cgroup), MTU, delay and loss
(netem, where the kernel has it).

How the numbers were chosen:

* `rpi3b`: Raspberry Pi 3 Model B, the workers of the K8sDDS study. Its Ethernet is 10/100
  (LAN9514 on USB 2.0), so the uplink is 100 Mbit/s. Its four Cortex-A53 cores at 1.2 GHz are
  several times slower per core than a current x86 core; a quota of 0.5 CPU per node (all its
  processes and pods together) makes the node clearly slower than the host while leaving
  ddsperf able to run.
* `rpi4`: Raspberry Pi 4 Model B: Gigabit Ethernet (1000 Mbit/s), Cortex-A72 at 1.5 GHz,
  roughly twice a Pi 3B per core: a quota of 1.0 CPU.
* `rpi3b-wifi`: a Pi 3B on its 2.4 GHz 802.11n radio: about 40 Mbit/s in practice, 2 ms of
  delay and 0.1 % loss (needs netem; where the kernel lacks it, the profile says so).
* `cloud`: no limits (the machine as it is).

The burst of each tbf is at least the rate divided by 100 (10 ms of traffic at line rate),
so the rate holds with a 100 Hz timer.
"""

from __future__ import annotations

from dataclasses import dataclass


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


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("cloud", about="no limits"),
        Profile("rpi3b", rate_mbit=100, burst_kb=128, cpu=0.5,
                about="Raspberry Pi 3B: 100 Mbit/s Ethernet, 0.5 CPU"),
        Profile("rpi4", rate_mbit=1000, burst_kb=1280, cpu=1.0,
                about="Raspberry Pi 4B: 1 Gbit/s Ethernet, 1 CPU"),
        Profile("rpi3b-wifi", rate_mbit=40, burst_kb=64, cpu=0.5, delay_ms=2, loss_pct=0.1,
                about="Raspberry Pi 3B on 2.4 GHz Wi-Fi: 40 Mbit/s, 2 ms, 0.1 % loss"),
    )
}
