"""What the emulated cluster cannot show, said in every run's manifest and report."""

from __future__ import annotations

from collections.abc import Iterable

from k8sdds.testbed import cgroups


def cannot_show(profiles: Iterable[dict]) -> list[str]:
    """One line per limit of the emulation for these applied profiles (Profile fields)."""
    out = []
    for p in profiles:
        cpu = p.get("cpu")
        if cpu is None:
            continue
        name, source = p.get("name", "?"), p.get("cpu_from", "")
        period = cgroups.period_us(cpu) / 1000
        out.append(f"{name}: the CPU budget ({cpu:g} of one CPU of this machine) is enforced "
                   f"in periods of {period:g} ms; a node out of budget waits for the next "
                   f"period, so latency tails reach {period:g} ms where the board's would "
                   "not, and the parallelism of the board's cores is not emulated")
        out.append(f"{name}: repeats spread more than on the board: the CV of 1 KiB "
                   "throughput over 5 repeats of 10 s was 2 to 13 % on the release machine, "
                   "which runs work under the budget unsteadily (README, Fidelity; `k8sdds "
                   f"testbed steadiness --profile {name}` measures this machine); use "
                   "several repeats and read the confidence intervals")
        if source.startswith("not calibrated"):
            out.append(f"{name}: the CPU budget is a guess, not calibrated "
                       "(`k8sdds testbed calibrate`)")
        elif "release machine" in source:
            out.append(f"{name}: the CPU budget was calibrated on the release machine, not "
                       "on this one (`k8sdds testbed calibrate`)")
    return out
