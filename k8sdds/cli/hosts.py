"""What the `k8sdds cluster` commands share: the inventory read once, the per-host logs
(appended to; a dry run lists only its own commands), work on every host at once, and the
report of what each host did, and the options they share."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import typer

from k8sdds.cli.common import err_console, out_console
from k8sdds.cluster.images import DEFAULT_ADDRESS

# the options every `k8sdds cluster` command shares
INVENTORY = typer.Option(..., "--inventory", "-i", help="Inventory (YAML): hosts with name, "
                         "address, user, key, role, arch (docs/how-to/bare-hosts.md).")
KNOWN_HOSTS = typer.Option(None, "--known-hosts", help="known_hosts file host keys are "
                           "checked against [the inventory's known_hosts, ~/.ssh/known_hosts].")
DRY_RUN = typer.Option(False, "--dry-run", help="Print every remote command per host; "
                       "connect to none.")
HOST_LOGS = typer.Option(Path("logs/cluster"), "--log-dir", help="Per-host logs of every "
                         "command, its output and how long it took.")
CONTAINERD = typer.Option(DEFAULT_ADDRESS, "--containerd-address",
                          help="containerd's socket on the hosts.")


def _cni_choices() -> list[str]:
    from k8sdds import cni

    return list(cni.PLANS)


CNI = typer.Option(..., "--cni", help="The CNI to install: "
                   f"{', '.join(_cni_choices())}.")


def hosts(inventory: Path, known_hosts: Path | None):
    from k8sdds.cluster import inventory as inv

    loaded = inv.load(inventory)
    return loaded, str(known_hosts) if known_hosts else loaded.known_hosts


@dataclass
class HostLogs:
    """The per-host log folder, and where each host's log ended before this command (logs
    are appended to: a dry run lists only its own commands)."""

    folder: Path
    start: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return str(self.folder)

    def mark(self, hosts) -> HostLogs:
        for h in hosts:
            log = self.folder / f"{h.name}.log"
            self.start[h.name] = log.stat().st_size if log.exists() else 0
        return self

    def since(self, host) -> str:
        with open(self.folder / f"{host.name}.log", "rb") as fh:
            fh.seek(self.start.get(host.name, 0))
            return fh.read().decode(errors="replace")


def logs_of(logs: Path, hosts) -> HostLogs:
    from k8sdds.cluster.remote import log_dir

    return HostLogs(log_dir(logs)).mark(hosts)


def per_host(loaded, known: str, dry_run: bool, logs: Path, work):
    """`work(remote)` on every host of `loaded` at once; (results, log folder)."""
    from k8sdds.cluster.remote import on_hosts

    folder = logs_of(logs, loaded.hosts)
    return on_hosts(loaded.hosts, known, dry_run, folder.folder, work), folder


def dry_run_listing(folder: HostLogs, hosts, results: dict) -> None:
    """The commands each host would be given; a host the real command would fail on, by
    name, with why (exit status 1)."""
    from k8sdds.cluster.remote import HostError

    for host in hosts:
        out_console.print(f"[bold]{host.name}[/bold] ({host.user}@{host.address}:{host.port})")
        out_console.print(folder.since(host).rstrip(), markup=False, highlight=False)
    failed = {h: r for h, r in results.items() if isinstance(r, HostError)}
    for host, error in failed.items():
        err_console.print(f"[red]{host}: would fail[/red]: {error}")
    if failed:
        raise typer.Exit(1)


def report(results: dict, what: str, folder: Path) -> None:
    """What each host did; the hosts that failed by name (the others are done)."""
    from k8sdds.cluster.remote import HostError

    failed = [h for h, r in results.items() if isinstance(r, HostError)]
    for host, done in results.items():
        if isinstance(done, HostError):
            err_console.print(f"[red]{host}: failed[/red]: {done}")
        else:
            out_console.print(f"{host}: {'; '.join(done)}")
    out_console.print(f"{what}: {len(results) - len(failed)}/{len(results)} hosts; per-host "
                      f"logs: {folder}")
    if failed:
        err_console.print(f"not done on: {', '.join(failed)} (the others are)")
        raise typer.Exit(1)
