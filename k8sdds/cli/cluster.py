"""`k8sdds cluster`: bare hosts over SSH (check, tune, init, join, reset; what goes onto
the hosts, images and engines, is cluster_parts.py)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from k8sdds.cli.cluster_parts import (
    cluster_engines,
    cluster_images,
    cluster_install,
    cluster_load_image,
)
from k8sdds.cli.common import choice, err_console, out_console, web_url
from k8sdds.cli.hosts import (
    CNI,
    CONTAINERD,
    DRY_RUN,
    HOST_LOGS,
    INVENTORY,
    KNOWN_HOSTS,
    dry_run_listing,
    hosts,
    logs_of,
    per_host,
    report,
)
from k8sdds.cluster import tune

cluster_app = typer.Typer(no_args_is_help=True,
                          help="Bare hosts over SSH: preflight checks, network tuning, "
                          "kubeadm bring-up.")
def cluster_check(inventory: Path = INVENTORY,
                  cni: str | None = typer.Option(None, "--cni", help="Also check that the "
                                                 "images this CNI runs are on every host "
                                                 "[kubeadm's images only]."),
                  address: str = CONTAINERD,
                  known_hosts: Path | None = KNOWN_HOSTS,
                  dry_run: bool = DRY_RUN, log_dir: Path = HOST_LOGS) -> None:
    """Preflight of every host: reachable, swap off, cgroup memory/cpuset, br_netfilter,
    ip_forward, container runtime, kubeadm and kubelet, time skew, and the images kubeadm
    (and --cni's manifest) will run; the fix for each failure. Exit status 1 when a check
    fails on a host."""
    from k8sdds import cni as cnis
    from k8sdds import engines
    from k8sdds.cluster.checks import check_host, engines_check, image_check
    from k8sdds.cluster.remote import HostError
    from k8sdds.cni.manifests import images

    plan = cnis.PLANS[choice(cni, list(cnis.PLANS), "--cni")] if cni else None
    cni_images = images(plan) if plan else []
    loaded, known = hosts(inventory, known_hosts)
    control = loaded.control_plane().name
    fix = f"k8sdds cluster images --cni {plan.name if plan else 'CNI'} --from DIR (or --build)"
    own = engines.programs()
    results, folder = per_host(loaded, known, dry_run, log_dir, lambda r: [
        *check_host(r), image_check(r, r.host.name == control, cni_images, address, fix),
        engines_check(r, own)])
    if dry_run:
        dry_run_listing(folder, loaded.hosts, results)
        return
    table = Table(title="cluster check")
    for col in ("host", "check", "result", "found", "fix"):
        table.add_column(col, overflow="fold")
    failed = False
    for host, outcome in results.items():
        if isinstance(outcome, HostError):
            failed = True
            table.add_row(host, "reachable", "[red]fail[/red]", str(outcome), "")
            continue
        for o in outcome:
            failed |= not o.passed and not o.advisory
            result = "pass" if o.passed else "[yellow]note[/yellow]" if o.advisory \
                else "[red]fail[/red]"
            table.add_row(host, o.check, result, o.found, o.fix)
    out_console.print(table)
    out_console.print(f"per-host logs: {folder}")
    if failed:
        raise typer.Exit(1)


def cluster_tune(
    inventory: Path = INVENTORY,
    revert: bool = typer.Option(False, "--revert", help="Restore the values the first tune "
                                "replaced, and remove the drop-in."),
    keys: str | None = typer.Option(None, "--keys", help="Comma-separated subset of the "
                                    "sysctls [all of them: " + ", ".join(tune.SETTINGS)
                                    + "; docs/how-to/bare-hosts.md]."),
    root: str = typer.Option("", "--root", help="Prefix of the files written on the hosts "
                             "(/etc/sysctl.d/..., /etc/k8sdds/...), for tests; {host} in it "
                             "is the host's name [none]."),
    known_hosts: Path | None = KNOWN_HOSTS, dry_run: bool = DRY_RUN,
    log_dir: Path = HOST_LOGS,
) -> None:
    """The K8sDDS network tuning (socket buffers, backlog, fragments) as
    /etc/sysctl.d/90-k8sdds.conf on every host, idempotent; --revert undoes it. A host that
    fails is reported by name; the others are done (or reverted) all the same."""
    from k8sdds.cluster import tune as tuning
    from k8sdds.cluster.remote import HostError

    chosen = list(tuning.SETTINGS) if not keys else [k.strip() for k in keys.split(",")
                                                      if k.strip()]
    for key in chosen:
        if key not in tuning.SETTINGS:
            raise typer.BadParameter(f"{key!r} is not one of {', '.join(tuning.SETTINGS)}",
                                     param_hint="--keys")
    loaded, known = hosts(inventory, known_hosts)
    results, folder = per_host(
        loaded, known, dry_run, log_dir,
        (lambda r: tuning.revert(r, root)) if revert else
        (lambda r: tuning.tune(r, chosen, root)))
    if dry_run:
        dry_run_listing(folder, loaded.hosts, results)
        return
    failed = [h for h, r in results.items() if isinstance(r, HostError)]
    for host, changes in results.items():
        if isinstance(changes, HostError):
            err_console.print(f"[red]{host}: failed[/red]: {changes}")
            continue
        for c in changes:
            out_console.print(f"{host}: {c.key}: {c.before} -> {c.after}")
        if not changes:
            out_console.print(f"{host}: nothing to {'revert' if revert else 'change'}")
    done = len(results) - len(failed)
    out_console.print(f"{'reverted' if revert else 'tuned'} {done}/{len(results)} hosts; "
                      f"per-host logs: {folder}")
    if failed:
        err_console.print(f"not done on: {', '.join(failed)} (the others are)")
        raise typer.Exit(1)


PREFLIGHT = typer.Option(None, "--ignore-preflight-errors", help="kubeadm's preflight checks "
                         "to ignore, comma-separated (kubeadm's names, or all) [none].")


def _preflight(value: str | None) -> str | None:
    from k8sdds.cluster.kubeadm import PREFLIGHT as PATTERN

    if value is not None and not PATTERN.match(value):
        raise typer.BadParameter(f"{value!r} is not a comma-separated list of kubeadm check "
                                 "names (letters, digits, . _ -) or all",
                                 param_hint="--ignore-preflight-errors")
    return value


def cluster_init(
    inventory: Path = INVENTORY, cni: str = CNI,
    kubeadm_config: Path | None = typer.Option(
        None, "--kubeadm-config", help="YAML documents added to the kubeadm configuration "
        "k8sdds writes: KubeletConfiguration, KubeProxyConfiguration; an InitConfiguration "
        "or ClusterConfiguration is merged over k8sdds's [none]."),
    manifest_url: str | None = typer.Option(
        None, "--manifest-url", callback=web_url, help="Apply the CNI's manifest from this "
        "URL on the control "
        "plane (the online way; the host needs the internet) instead of the copy shipped "
        "with k8sdds [the shipped, pinned copy]."),
    ignore_preflight_errors: str | None = PREFLIGHT,
    kubeconfig: Path = typer.Option(
        Path("admin.conf"), "--kubeconfig", help="Where the new cluster's admin kubeconfig "
        "is written (fetched over SSH from the control plane, mode 0600; what `k8sdds run "
        "--backend kubernetes --kubeconfig` then takes). An init makes a new CA, so the "
        "file of an earlier cluster no longer works: this one replaces it."),
    known_hosts: Path | None = KNOWN_HOSTS, dry_run: bool = DRY_RUN,
    log_dir: Path = HOST_LOGS,
) -> None:
    """kubeadm init on the control plane with the CNI's pod network and the Kubernetes
    version of its own kubeadm, then the CNI from the manifest shipped with k8sdds (pinned,
    checked by SHA-256, applied from the control plane's copy: no internet needed;
    weave-encrypted: a generated password, never printed); the admin kubeconfig is fetched
    to --kubeconfig. Load the images first: `k8sdds cluster images`."""
    from dataclasses import replace

    from k8sdds import cni as cnis
    from k8sdds.cluster import kubeadm
    from k8sdds.cluster.inventory import Inventory
    from k8sdds.cni.manifests import shipped

    plan = cnis.PLANS[choice(cni, list(cnis.PLANS), "--cni")]
    ignore = _preflight(ignore_preflight_errors)
    if manifest_url is not None:
        plan = replace(plan, url=manifest_url)
    extra = kubeadm.extra_config(kubeadm_config) if kubeadm_config else []
    if not dry_run and plan.manifest is not None and manifest_url is None:
        shipped(plan.cni)  # the digest, before any host is touched
    loaded, known = hosts(inventory, known_hosts)
    control = Inventory((loaded.control_plane(),), loaded.known_hosts)
    fetched: list[str] = []

    def _init(remote) -> list[str]:
        done = kubeadm.init(remote, plan, extra, ignore, url=manifest_url is not None)
        if not dry_run:
            fetched.append(kubeadm.admin_conf(remote))
        return done

    results, folder = per_host(control, known, dry_run, log_dir, _init)
    if dry_run:
        dry_run_listing(folder, control.hosts, results)
        return
    report(results, f"init with {plan.name}", folder)
    out_console.print(kubeadm.keep_admin_conf(kubeconfig, fetched[0]))


def cluster_join(inventory: Path = INVENTORY,
                 ignore_preflight_errors: str | None = PREFLIGHT,
                 known_hosts: Path | None = KNOWN_HOSTS,
                 dry_run: bool = DRY_RUN, log_dir: Path = HOST_LOGS) -> None:
    """Join every worker with a fresh token from the control plane, then wait until every
    node is Ready."""
    from k8sdds.cluster import kubeadm

    ignore = _preflight(ignore_preflight_errors)
    loaded, known = hosts(inventory, known_hosts)
    folder = logs_of(log_dir, loaded.hosts)
    results = kubeadm.join_all(loaded, known, dry_run, folder.folder, ignore)
    if dry_run:
        dry_run_listing(folder, loaded.hosts, results)
        return
    report(results, "join", folder)


def cluster_reset(inventory: Path = INVENTORY, known_hosts: Path | None = KNOWN_HOSTS,
                  purge: bool = typer.Option(False, "--purge", help="Also remove what `k8sdds "
                                             "cluster install` put on each host (the files "
                                             "it replaced put back, the Debian packages it "
                                             "installed purged, with containerd's images): "
                                             "the host as it was before install."),
                  dry_run: bool = DRY_RUN, log_dir: Path = HOST_LOGS) -> None:
    """Every node drained from the control plane (its pods leave through the CNI while it
    runs), then kubeadm reset -f on every host, and what it leaves: the CNIs' files
    (/etc/cni/net.d, /var/lib/cni, /run/flannel, /var/lib/weave, their plugins in
    /opt/cni/bin), links, routes, ipsets and the cluster's iptables rules (KUBE-, CNI-,
    FLANNEL-, WEAVE, cali-, CILIUM_, KUBE-ROUTER). Loaded images stay, unless --purge
    removes the node parts `cluster install` put on."""
    from k8sdds.cluster import kubeadm

    loaded, known = hosts(inventory, known_hosts)
    folder = logs_of(log_dir, loaded.hosts)
    results = kubeadm.reset_all(loaded, known, dry_run, folder.folder, purge=purge)
    if dry_run:
        dry_run_listing(folder, loaded.hosts, results)
        return
    report(results, "reset", folder)


def register(app: typer.Typer) -> None:
    for name, command in (("check", cluster_check), ("tune", cluster_tune),
                          ("images", cluster_images), ("init", cluster_init),
                          ("join", cluster_join), ("reset", cluster_reset),
                          ("load-image", cluster_load_image), ("engines", cluster_engines),
                          ("install", cluster_install)):
        cluster_app.command(name)(command)
    app.add_typer(cluster_app, name="cluster")
