"""`k8sdds testbed datapaths`: the emulated datapaths, whether this machine offers each, and
with --probe whether multicast crosses each, probed (testbed.multicast)."""

from __future__ import annotations

import typer
from rich.table import Table

from k8sdds import model
from k8sdds.cli.common import TESTBED_NAME, err_console, out_console, testbed_locked
from k8sdds.errors import UserError
from k8sdds.testbed.spec import DEFAULT_NAME

WIDE = typer.Option(False, "--wide", help="Descriptions in the table (wider than 80 "
                    "columns) instead of under it.")
PROBE = typer.Option(False, "--probe", help="Also send multicast across each datapath this "
                     "machine offers (on --testbed, brought up and taken down again if it is "
                     "down; its datapath restored): whether it arrived at the other nodes and "
                     "beside the sender, against the record. Root; seconds a datapath.")


def testbed_datapaths(wide: bool = WIDE, probe: bool = PROBE,
                      name: str | None = TESTBED_NAME) -> None:
    """List the datapaths the emulated cluster offers, and whether this machine can; with
    --probe, whether multicast crosses each, as probed (exit 1 where a record disagrees)."""
    from k8sdds.testbed.multicast import record_says
    from k8sdds.testbed.wiring.kinds import WIRING, datapath_unavailable

    probed = _probe_all(DEFAULT_NAME if name is None else name) if probe else {}
    table = Table(title="emulated datapaths")
    for col in ("datapath", "encapsulation", "MTU", "multicast", "encryption", "here",
                *(("probed",) if probe else ()), *(("emulates",) if wide else ())):
        table.add_column(col, overflow="fold")
    notes, disagree = [], []
    for name_ in WIRING:
        dp = model.datapath(name_)
        reason = datapath_unavailable(dp)
        found = probed.get(name_)
        seen = "-" if found is None else found.reach()
        if found is not None and found.disagrees(dp):
            disagree.append(f"{name_}: the record says multicast "
                            f"{record_says(dp)}; the probe: {found.said()}")
        table.add_row(name_, dp.encapsulation, str(dp.mtu), record_says(dp), dp.encryption,
                      "yes" if not reason else "no", *((seen,) if probe else ()),
                      *((dp.emulates + (f" (not here: {reason})" if reason else ""),)
                        if wide else ()))
        notes.append(f"{name_}: {dp.emulates}" + (f" Not here: {reason}" if reason else ""))
    out_console.print(table)
    if not wide:
        for line in notes:
            out_console.print(line, markup=False, highlight=False)
    for name_, found in probed.items():
        out_console.print(f"multicast on {name_}: {found.said()}", markup=False,
                          highlight=False)
    if disagree:
        for line in disagree:
            err_console.print(f"error: {line}", markup=False, highlight=False)
        raise typer.Exit(1)


def _probe_all(name: str) -> dict:
    """Each datapath this machine offers -> its multicast probe, on testbed `name` (brought
    up for it and taken down after where it was down)."""
    from k8sdds.deployment import options_of
    from k8sdds.testbed import multicast
    from k8sdds.testbed.kube.kubelets import Kubelets
    from k8sdds.testbed.spec import default_nodes
    from k8sdds.testbed.testbed import Testbed

    existing = Testbed.existing(name)
    # as `testbed up` makes it: a control plane and three workers
    tb = existing or Testbed(default_nodes(options_of("emulated", {}).nodes, name=name))
    with testbed_locked(name):
        if existing is not None and Kubelets(existing).running():
            raise UserError(f"testbed {name} runs a Kubernetes cluster, whose CNI wires it: "
                            "probe another (--testbed NAME), or `k8sdds testbed down` first")
        if existing is None:
            err_console.print(f"testbed {name}: up for the probe (taken down after)")
            tb.up()
        try:
            return multicast.every_datapath(tb, lambda line: err_console.print(
                line, markup=False, highlight=False))
        finally:
            if existing is None:
                tb.down()


