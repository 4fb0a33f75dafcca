"""`k8sdds testbed`: the emulated edge cluster by hand (up, status, down, datapaths,
profiles, calibrate, steadiness)."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.table import Table

from k8sdds import model
from k8sdds.cli import datapaths
from k8sdds.cli.common import (
    TESTBED_NAME,
    backend_option,
    check_available,
    datapath_list,
    err_console,
    one_of,
    out_console,
    testbed_locked,
)
from k8sdds.cli.datapaths import WIDE
from k8sdds.errors import UserError
from k8sdds.testbed.spec import DEFAULT_NAME

testbed_app = typer.Typer(no_args_is_help=True, help="Manage the emulated edge cluster by hand.")


def _real_cnis() -> str:
    """The datapaths a real CNI carries on the testbed cluster (their CNI records say)."""
    from k8sdds import cni

    return ", ".join(d.name for d in model.DATAPATHS.values()
                     if (c := cni.OWNER.get(d.name)) and c.testbed
                     and d.name in c.testbed.datapaths)


OLD_NAME = typer.Option(None, "--name", hidden=True, help="The old spelling of --testbed.")


def testbed_up(name: str | None = backend_option("testbed"),
               old_name: str | None = OLD_NAME,
               nodes: int | None = backend_option("nodes"),
               profile: str | None = backend_option("profile"),
               testbed_spec: Path | None = backend_option("testbed_spec"),
               old_spec: Path | None = typer.Option(
                   None, "--spec", hidden=True, help="The old spelling of --testbed-spec."),
               datapath: str | None = typer.Option(
                   None, "--datapath", help="Datapath to wire [host; with --kubernetes: "
                   "flannel-hostgw]."),
               kubernetes: bool = typer.Option(
                   False, "--kubernetes", help="Also run a real Kubernetes cluster on it: the "
                   "control plane on node0, containerd + kubelet + kube-proxy on every worker, "
                   "CoreDNS; prints the kubeconfig for `k8sdds run --backend kubernetes`."),
               image_archive: Path | None = typer.Option(
                   None, "--image-archive", help="With --kubernetes: the engine image archive "
                   "the nodes import [built by `k8sdds image build`, cached]."),
               pod_network: str | None = typer.Option(
                   None, "--pod-network", help="With --kubernetes: what carries the pods. "
                   "real: the datapath's own CNI, its DaemonSet from the pinned upstream "
                   f"manifest (for {_real_cnis()}); emulated: the testbed's wiring of the "
                   "datapath with Debian's bridge plugin; auto: real where it can run here, "
                   "else emulated [auto]."),
               old_cni: str | None = typer.Option(
                   None, "--cni", hidden=True, help="The old spelling of --pod-network."),
               ) -> None:
    """Bring the emulated cluster up (a run reuses it and leaves it up)."""
    name = one_of(name, old_name, "--testbed", "--name")
    mode = one_of(pod_network, old_cni, "--pod-network", "--cni") or "auto"
    testbed_spec = one_of(testbed_spec, old_spec, "--testbed-spec", "--spec")
    from k8sdds import cni
    from k8sdds.testbed.wiring.kinds import WIRING, datapath_unavailable

    dp = datapath or (cni.CLUSTER_DEFAULT if kubernetes else "host")
    [dp] = datapath_list(dp, list(WIRING))[:1]
    check_available(lambda name: datapath_unavailable(model.datapath(name)), [dp])
    if kubernetes:
        from k8sdds.testbed.kube.up import check_datapath

        check_datapath(dp, mode)
    elif mode != "auto" or image_archive is not None:
        raise UserError("--pod-network and --image-archive are for --kubernetes")
    from k8sdds.deployment import options_of
    from k8sdds.testbed.testbed import Testbed

    given = options_of("emulated", {"testbed": name, "nodes": nodes, "profile": profile,
                                    "testbed_spec": testbed_spec})
    tb = Testbed.described(given.testbed_spec, given.testbed, given.nodes, given.profile)
    with testbed_locked(tb.spec.name):
        tb.up()
        if kubernetes:
            from k8sdds.testbed.kube.up import bring_up

            kubeconfig = bring_up(tb, dp, image_archive, mode, say=lambda line: err_console.print(
                line, markup=False, highlight=False))
        else:
            tb.use_datapath(dp)
    _status(tb)
    if kubernetes:
        out_console.print(f"kubeconfig: {kubeconfig}")


def testbed_profiles(wide: bool = WIDE) -> None:
    """List the edge node profiles (link rate, CPU budget, MTU, delay, loss) and where each
    CPU budget comes from."""
    from k8sdds.testbed.capabilities import qdisc
    from k8sdds.testbed.profiles import PROFILES, not_emulated, resolve

    netem = qdisc("netem")
    table = Table(title="edge node profiles")
    for col in ("profile", "Mbit/s", "burst KB", "CPUs", "MTU", "delay ms", "loss %", "AES",
                *(("about", "CPUs from") if wide else ())):
        table.add_column(col, overflow="fold")
    notes = []
    for name in PROFILES:
        p = resolve(name)
        cut = " *" if netem and (p.delay_ms or p.loss_pct) else ""
        table.add_row(p.name, _or_dash(p.rate_mbit), _or_dash(p.burst_kb or None),
                      _or_dash(p.cpu), _or_dash(p.mtu), _or_dash(p.delay_ms) + cut,
                      _or_dash(p.loss_pct) + cut, "yes" if p.aes else "software",
                      *((p.about, p.cpu_from) if wide else ()))
        notes.append(f"{p.name}: {p.about}" + (" (* not applied here: the kernel has no "
                                               "netem)" if cut else "")
                     + (f". CPUs: {p.cpu_from}" if p.cpu is not None else "")
                     + ("" if p.aes else ". No AES instructions: the engines' OpenSSL does AES "
                        "in software" + (f" ({why})" if (why := not_emulated(p)) else ""))
                     + (f". Programs: the board's own {p.program_arch} builds under qemu-user"
                        "; the kernel's share of a pod path at the board's pace: "
                        + (", ".join(f"{d} {r} idle rules a packet"
                                     for d, r in p.hop_rules.items()) or "not calibrated")
                        if p.program_arch else ""))
    out_console.print(table)
    if not wide:
        for line in notes:
            out_console.print(line, markup=False, highlight=False)


def testbed_calibrate(
        profile: str = typer.Option("rpi3b", "--profile", help="The profile whose CPU "
                                    "budget to calibrate (its board's host figures)."),
        figures: Path | None = typer.Option(
            None, "--figures", help="CSV data_len,throughput_mbps: your board's own host "
            "(hostNetwork) throughput, rows for 1024 and 16384 at least [the built-in "
            "published figures]."),
        duration: float = typer.Option(5.0, "--duration", min=1.0,
                                       help="Seconds of each measurement."),
        repeats: int = typer.Option(3, "--repeats", min=1, max=20,
                                    help="Measurements per step (their median counts)."),
        rounds: int = typer.Option(3, "--rounds", min=1, max=10,
                                   help="Rounds of the ladder and of the check (each "
                                   "budget measured once a round)."),
        output: Path | None = typer.Option(
            None, "--output", help="Calibration file to write [K8SDDS_CALIBRATION, else "
            "/var/lib/k8sdds/calibration.json]."),
        name: str | None = typer.Option(None, "--testbed", help="Name of the testbed the "
                                        "calibration brings up and takes down [kdcalib]."),
        old_name: str | None = OLD_NAME,
        json_out: bool = typer.Option(False, "--json", help="Print the calibration as JSON."),
) -> None:
    """Derive a profile's CPU budget from a measurement: the share of this machine's CPU at
    which an emulated node's host network shows the board's published host figures (the
    ratio of 1 KiB to link-bound throughput). For a profile that runs the board's own
    programs (rpi3b-armhf), then its kernel's share at the board's pace at that budget: each
    pod path's extra CPU per message measured beside the host, and the one factor at which a
    named pod datapath (flannel-vxlan at 1 KiB) shows its published ratio to the host. Takes
    minutes; every run after it uses the result."""
    import json
    from dataclasses import asdict

    from k8sdds.testbed import calibration
    from k8sdds.testbed.calibrate import Settings, board_of, calibrate
    from k8sdds.testbed.layout import check_name
    from k8sdds.testbed.testbed import preflight

    board = board_of(profile, figures)
    name = one_of(name, old_name, "--testbed", "--name") or "kdcalib"
    check_name(name)
    preflight()
    settings = Settings(profile=profile, duration=duration, repeats=repeats, rounds=rounds,
                        testbed=name)

    def say(line: str) -> None:
        err_console.print(line, markup=False, highlight=False)

    takes = (f"{settings.minutes:.0f} min" if settings.minutes >= 1
             else f"{settings.minutes * 60:.0f} s")
    say(f"calibrating {profile} against the {board.name} ({board.source}): {rounds} rounds "
        f"of {repeats} x {duration:g} s a step, about {takes}")
    cal = calibrate(settings, board, say)
    path = calibration.save(cal, output)
    if json_out:
        print(json.dumps({**asdict(cal), "file": str(path)}, indent=2))
        return
    out_console.print(f"{profile}: {cal.cpu:g} CPU, written to {path}", markup=False,
                      highlight=False)
    out_console.print(cal.describe(reference=False), markup=False, highlight=False)
    if cal.hop_fit:
        fit = cal.hop_fit
        out_console.print(
            f"the kernel's share at the board's pace: x{fit['factor']:g} of this machine's "
            f"extra per message, fitted on {cal.hop_cell} (published {cal.hop_target:.2f} of "
            f"host; residual {fit['residual']:g}); idle rules a packet: "
            + ", ".join(f"{d} {r}" for d, r in cal.path_rules().items()),
            markup=False, highlight=False)


def testbed_steadiness(
        profile: str = typer.Option("rpi3b", "--profile", help="The profile whose CPU "
                                    "budget the probe runs under."),
        seconds: float = typer.Option(15.0, "--seconds", help="Seconds of each "
                                      "measurement (at least 2)."),
        rounds: int = typer.Option(3, "--rounds", min=1, max=20,
                                   help="Rounds, each with no limit and then under the "
                                   "budget."),
        cpu: int | None = typer.Option(None, "--cpu", help="The CPU the probe is kept on "
                                       "[1 where there are two or more, else 0]."),
        slots: int = typer.Option(32768, "--slots", min=1024, max=16_777_216,
                                  help="Slots of the probe's pointer chase (32768: about "
                                  "1 MB with their objects)."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Measure how steadily this machine runs work under a profile's CPU budget: the floor
    under the spread of repeats on budgeted nodes. A probe chasing pointers through about
    1 MB runs in a cgroup of its own, with no limit and then under the budget; a steady
    machine keeps the CV of its half-second rates under the budget near the unlimited one.
    Run it with no testbed busy: it shares the CPU with whatever runs there."""
    import json
    from dataclasses import asdict

    from k8sdds.testbed import steadiness
    from k8sdds.testbed.profiles import resolve
    from k8sdds.testbed.spec import check_profile

    check_profile(profile, "--profile")
    budget = resolve(profile).cpu
    pin = cpu if cpu is not None else (1 if (os.cpu_count() or 1) > 1 else 0)
    steadiness.check(profile, budget, pin, seconds)

    def say(r, i: int) -> None:
        err_console.print(
            f"round {i}/{rounds}: no limit CV {r.free_cv_pct:.1f} % | under the budget CV "
            f"{r.budget_cv_pct:.1f} % (slowest {r.low:.2f}, fastest {r.high:.2f} of the "
            f"mean), efficiency {r.efficiency:.2f}", markup=False, highlight=False)

    err_console.print(f"probe: {slots} slots on CPU {pin}, {profile}'s budget {budget:g} "
                      f"CPU, {rounds} x 2 x {seconds:g} s", markup=False, highlight=False)
    result = steadiness.measure(profile, budget, pin=pin, seconds=seconds, rounds=rounds,
                                slots=slots, say=say)
    if json_out:
        print(json.dumps(asdict(result), indent=2))
        return
    cvs = [r.budget_cv_pct for r in result.rounds]
    free = [r.free_cv_pct for r in result.rounds]
    effs = [r.efficiency for r in result.rounds]
    out_console.print(
        f"{profile} ({budget:g} CPU in periods of {result.period_ms:g} ms) on CPU {pin}: "
        f"CV of half-second rates {min(cvs):.1f} to {max(cvs):.1f} % under the budget, "
        f"{min(free):.1f} to {max(free):.1f} % with no limit; efficiency {min(effs):.2f} "
        f"to {max(effs):.2f}", markup=False, highlight=False)


def _or_dash(value) -> str:
    return "-" if value is None else f"{value:g}"


def testbed_status(name: str | None = TESTBED_NAME, old_name: str | None = OLD_NAME) -> None:
    """Show the emulated cluster: nodes, datapath, pods, processes; and its Kubernetes
    cluster's nodes, when it runs one."""
    name = one_of(name, old_name, "--testbed", "--name")
    from k8sdds.testbed.kube.kubelets import Kubelets
    from k8sdds.testbed.testbed import Testbed

    name = DEFAULT_NAME if name is None else name
    tb = Testbed.existing(name)
    if tb is None:
        out_console.print(f"testbed {name}: down")
        return
    _status(tb)
    kube = Kubelets(tb)
    if kube.running():
        out_console.print(f"kubeconfig: {kube.kubeconfig}", markup=False, highlight=False)


def testbed_down(name: str | None = TESTBED_NAME, old_name: str | None = OLD_NAME) -> None:
    """Remove every namespace, link and process of the testbed (also after a crash)."""
    name = one_of(name, old_name, "--testbed", "--name")
    from k8sdds.testbed.kube.kubelets import Kubelets
    from k8sdds.testbed.spec import TestbedSpec
    from k8sdds.testbed.testbed import Testbed

    name = DEFAULT_NAME if name is None else name
    tb = Testbed.existing(name) or Testbed(TestbedSpec(name=name))
    with testbed_locked(name):  # a crashed run holds no lock; a live one must finish first
        Kubelets(tb).down()  # its cluster first, if it runs one (or a killed one left)
        gone = tb.down()
    out_console.print(f"testbed {name}: down ({len(gone)} namespaces removed)")


def _status(tb) -> None:
    from k8sdds.testbed.kube.kubelets import Kubelets

    st = tb.status()
    wired = "" if st["wired"] else " (wired by its CNI)"
    table = Table(title=f"testbed {st['name']}: {'up' if st['up'] else 'incomplete'}, "
                        f"datapath {st['datapath'] or 'none'}{wired}, {st['pods']} pods, "
                        f"{st['processes']} processes")
    for col in ("node", "role", "arch", "profile", "namespace", "address", "pod CIDR",
                "present"):
        table.add_column(col)
    for n in st["nodes"]:
        table.add_row(n["name"], n["role"], n["arch"], n["profile"], n["namespace"],
                      n["address"], n["pod_cidr"], "yes" if n["present"] else "no")
    out_console.print(table)
    for line in st["not_applied"]:
        err_console.print(f"[yellow]not applied:[/yellow] {line}")
    kube = Kubelets(tb)
    if kube.running():
        _kube_status(kube)


def _kube_status(kube) -> None:
    """The testbed cluster's nodes as the API server sees them."""
    out_console.print(f"Kubernetes: {kube.describe()['cni']}", markup=False, highlight=False)
    try:
        nodes = kube.nodes()
    except Exception as exc:  # noqa: BLE001 - the API is down: say so, status goes on
        err_console.print(f"[yellow]API server not answering:[/yellow] {exc}")
        return
    table = Table(title="Kubernetes nodes")
    for col in ("node", "ready", "kubelet", "pod CIDR", "pods"):
        table.add_column(col)
    for n in nodes:
        table.add_row(n["name"], n["ready"], n["kubelet"], n["pod_cidr"], str(n["pods"]))
    out_console.print(table)


def register(app: typer.Typer) -> None:
    testbed_app.command("up")(testbed_up)
    testbed_app.command("datapaths")(datapaths.testbed_datapaths)
    testbed_app.command("profiles")(testbed_profiles)
    testbed_app.command("calibrate")(testbed_calibrate)
    testbed_app.command("steadiness")(testbed_steadiness)
    testbed_app.command("status")(testbed_status)
    testbed_app.command("down")(testbed_down)
    app.add_typer(testbed_app, name="testbed")
