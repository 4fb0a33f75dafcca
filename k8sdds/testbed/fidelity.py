"""What the emulated cluster cannot show, said in every run's manifest and report."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from k8sdds.testbed import cgroups
from k8sdds.testbed.calibration import PACE_DRIFT
from k8sdds.testbed.profiles import ELSEWHERE, GUESS, HERE, RELEASE

STALE_HOURS = 12  # a calibration older than this is from another sitting of the machine


def _age_hours(when: str, now: dt.datetime) -> float | None:
    try:
        made = dt.datetime.fromisoformat(when)
    except ValueError:
        return None
    if made.tzinfo is None:
        made = made.replace(tzinfo=dt.timezone.utc)
    return (now - made).total_seconds() / 3600


def cannot_show(profiles: Iterable[dict], now: dt.datetime | None = None) -> list[str]:
    """One line per limit of the emulation for these applied profiles (Profile fields), at
    time `now` (default: now); among them the budget_notes."""
    profiles = list(profiles)
    out = []
    for p in profiles:
        cpu = p.get("cpu")
        if cpu is None:
            continue
        name = p.get("name", "?")
        period = cgroups.period_us(cpu) / 1000
        out.append(f"{name}: the CPU budget ({cpu:g} of one CPU of this machine) is enforced "
                   f"in periods of {period:g} ms; a node out of budget waits for the next "
                   f"period, so latency tails reach {period:g} ms where the board's would "
                   "not, and the parallelism of the board's cores is not emulated")
        out.append(f"{name}: repeats spread more than on the board (work under a CPU "
                   "budget runs unsteadily on a shared machine); this machine's spread was "
                   f"not measured before the run (`k8sdds testbed steadiness --profile {name}` "
                   "measures it); the spread of this run's own repeats is each test's CV in "
                   "the report's throughput table: use several repeats and read the "
                   "confidence intervals")
        if p.get("program_arch"):
            charged = sorted(p.get("hop_rules") or {})
            out.append(f"{name}: the kernel's share of a pod path is charged at the board's "
                       "pace only on the paths its calibration measured ("
                       + (", ".join(charged) or "none: not calibrated here") + "); on any "
                       "other pod path the kernel's work costs this machine's time")
    return out + budget_notes(profiles, now)


def budget_notes(profiles: Iterable[dict], now: dt.datetime | None = None) -> list[str]:
    """A line for each applied profile (Profile fields) whose CPU budget is not this
    machine's calibration of this sitting: a guess, the release machine's, one made when this
    machine ran at another pace (PACE_DRIFT), or one more than STALE_HOURS before `now`.
    `k8sdds run` prints them: every CPU-bound figure rests on it."""
    now = now or dt.datetime.now(dt.timezone.utc)
    out = []
    for p in profiles:
        if p.get("cpu") is None:
            continue
        name, origin = p.get("name", "?"), p.get("cpu_origin", "")
        if origin == GUESS:
            out.append(f"{name}: the CPU budget is a guess, not calibrated "
                       "(`k8sdds testbed calibrate`)")
        elif origin in (RELEASE, ELSEWHERE):
            where = "the release machine" if origin == RELEASE else "another machine"
            reason = p.get("cpu_away", "")
            out.append(f"{name}: the CPU budget was calibrated on {where}, not on this one"
                       + (f" ({reason})" if reason else "") + ": every figure of its nodes "
                       f"rests on it (`k8sdds testbed calibrate --profile {name}`)")
        elif origin == HERE:
            drift = p.get("cpu_pace")
            if drift and abs(drift - 1) > PACE_DRIFT:
                out.append(f"{name}: this machine runs {abs(drift - 1) * 100:.0f} % "
                           f"{'faster' if drift > 1 else 'slower'} than when its CPU budget "
                           "was calibrated (its loopback rate): the budget no longer gives "
                           "the board's figures, so every figure of its nodes reads "
                           f"{'high' if drift > 1 else 'low'}; `k8sdds testbed calibrate "
                           f"--profile {p.get('board') or name}` now")
            age = _age_hours(p.get("cpu_when") or "", now)
            if age is not None and age > STALE_HOURS:
                out.append(f"{name}: the CPU budget was calibrated {age:.0f} hours before "
                           f"this run ({p['cpu_when'][:16]}); on a shared machine it moves "
                           "between sittings: `k8sdds testbed calibrate` in the sitting you "
                           "measure in")
    return out
