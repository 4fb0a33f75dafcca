"""`k8sdds vm`: an emulated ARM machine on this one, to try k8sdds' bare-host and kubeadm
commands against an arm64 host without a Raspberry Pi."""

from __future__ import annotations

from pathlib import Path

import typer

from k8sdds.cli.common import err_console, out_console, url
from k8sdds.errors import UserError

vm_app = typer.Typer(no_args_is_help=True, help="An emulated ARM machine (qemu: a Pi 3's "
                     "Cortex-A53 running Debian's arm64 system, or a Pi 2's Cortex-A7 running "
                     "its armhf one, each with the Kubernetes node parts), with its own "
                     "address on a bridge of this machine. Proves what runs on ARM, not a "
                     "Pi's speed. Needs root. Guide: docs/how-to/arm-machine.md.")


def _say(line: str) -> None:
    err_console.print(line, markup=False, highlight=False)


def _board(arch: str):
    from k8sdds.vm.image import BOARDS

    if arch not in BOARDS:
        raise typer.BadParameter(f"{arch!r}: one of {', '.join(BOARDS)}", param_hint="--arch")
    return BOARDS[arch]


ARCH = typer.Option("arm64", "--arch", help="The machine's architecture, Debian's name: "
                    "arm64 (a Pi 3's Cortex-A53) or armhf (a Pi 2's Cortex-A7, 32-bit; its "
                    "inventory arch is arm).")
MIRROR = typer.Option("http://deb.debian.org/debian", "--mirror", callback=url,
                      help="Debian mirror for the machine's packages (its first build only).")


def vm_build(arch: str = ARCH, mirror: str = MIRROR) -> None:
    """Build the machine's disk (Debian's system with sshd, as a fresh Raspberry Pi OS: no
    Kubernetes part, which `k8sdds cluster install` puts on), once: about 4 minutes on 2
    cores, then cached in /var/cache/k8sdds/vm."""
    from k8sdds.vm.image import disk

    built = disk(_board(arch), _say, mirror)
    out_console.print(f"disk: {built.folder} (built in {built.built()['seconds']} s)")


def vm_up(
    name: str = typer.Argument(..., help="The machine's host name (and its name here)."),
    bridge: str = typer.Option(..., "--bridge", help="The bridge of this machine its network "
                               "card joins (a tap device): the hosts' LAN."),
    address: str = typer.Option(..., "--address", help="Its IPv4 address with the prefix "
                                "length, on the bridge's network: 10.252.0.14/24."),
    gateway: str = typer.Option(..., "--gateway", help="Its default route and DNS resolver "
                                "(the bridge's own address, say)."),
    key: Path = typer.Option(..., "--authorized-key", help="The public key root logs in "
                             "with (an authorized_keys file)."),
    memory: int = typer.Option(1024, "--memory", min=256, help="Its RAM in MiB (a Pi 3's: "
                               "1024)."),
    cpus: int | None = typer.Option(None, "--cpus", min=1, max=8, help="Its cores, each a "
                                    "thread of QEMU's [a Pi's 4, or this machine's where it "
                                    "has fewer]."),
    arch: str = ARCH,
    mirror: str = MIRROR,
    known_hosts: Path | None = typer.Option(None, "--known-hosts", help="Also append its host "
                                            "key to this known_hosts file."),
) -> None:
    """Boot an ARM machine (its disk built first if need be) and wait until its sshd
    answers; print its host key as a known_hosts line. It runs until `k8sdds vm down
    NAME`."""
    from k8sdds.guarded import read_text
    from k8sdds.vm.image import disk
    from k8sdds.vm.machine import STATE, Machine, Spec

    spec = Spec(name, address, gateway, bridge, read_text(key, "authorized key"), arch,
                memory, *([cpus] if cpus else []))
    spec.check()
    machine = Machine(STATE / name, spec)
    seconds = machine.up(disk(_board(arch), _say, mirror), _say)
    if known_hosts:
        with open(known_hosts, "a") as fh:
            fh.write(machine.known_host)
    _say(f"{name}: sshd answers at {spec.ip} after {seconds:.0f} s; qemu's RSS "
         f"{machine.rss_mib():.0f} MiB")
    out_console.print(machine.known_host.strip(), markup=False, highlight=False)


def vm_down(name: str = typer.Argument(..., help="The machine `k8sdds vm up` started.")
            ) -> None:
    """Stop the machine and remove what `up` made (its tap device, its layer over the
    disk); the disk stays cached."""
    from k8sdds.vm.machine import existing

    machine = existing(name)
    if machine is None:
        raise UserError(f"no machine {name} (k8sdds vm list)")
    machine.down()
    out_console.print(f"{name}: down")


def vm_list() -> None:
    """The machines `k8sdds vm up` started, and whether each is running."""
    from k8sdds.vm.machine import STATE, existing

    names = sorted(p.name for p in STATE.glob("*") if (p / "spec.json").exists())
    if not names:
        out_console.print("no machine")
    for name in names:
        machine = existing(name)
        state = "running" if machine and machine.pid() else "stopped (k8sdds vm down)"
        out_console.print(f"{name}: {machine.spec.address} on {machine.spec.bridge}, "
                          f"{machine.spec.arch}, {state}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    vm_app.command("build")(vm_build)
    vm_app.command("up")(vm_up)
    vm_app.command("down")(vm_down)
    vm_app.command("list")(vm_list)
    app.add_typer(vm_app, name="vm")
