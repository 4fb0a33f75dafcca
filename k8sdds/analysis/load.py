"""Load one or more run directories: the tidy results and the manifests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from k8sdds.analysis.stats import QUANTILES, latency_cdf
from k8sdds.errors import UserError
from k8sdds.results import RESULTS, ManifestError, RepeatKey, RunDir
from k8sdds.results.schema import BOOLEANS, BY_NAME, NAMES, PARAMS
from k8sdds.results.upgrade import upgrade_frame, upgrade_row

# PARAMS: what identifies a test across runs (so runs of different datapaths or clusters
# combine), from the results schema
REPEAT = ["run_id", "test", "repeat"]


@dataclass
class Runs:
    """Results of several runs, and their manifests by run id. A failed repeat's rows are
    left out (kept on disk for the record) unless loaded with include_failed; `excluded`
    counts the rows left out."""

    results: pd.DataFrame
    manifests: dict[str, dict]
    excluded: int = 0

    @property
    def summaries(self) -> pd.DataFrame:
        return self.results[self.results["kind"] == "summary"]

    def failed(self) -> list[tuple[str, str, str]]:
        """(run id, repeat, reason) of every failed repeat."""
        return [(rid, key, e.get("reason") or "")
                for rid, m in self.manifests.items()
                for key, e in m.get("repeats", {}).items() if e.get("status") == "failed"]


def failed_repeats(manifest: dict) -> set[tuple[int, int]]:
    """(test, repeat) of every repeat the manifest says failed. Pure."""
    out = set()
    for key, entry in manifest.get("repeats", {}).items():
        if entry.get("status") == "failed":
            try:
                parsed = RepeatKey.parse(key)
            except ManifestError:  # a loaded manifest was checked: not a repeat of it
                continue
            out.add((parsed.test, parsed.repeat))
    return out


def without_failed(df: pd.DataFrame, failed: set[tuple[int, int]]) -> pd.DataFrame:
    """`df` without the rows of the failed repeats: a half-measured repeat never enters a
    summary, a figure or a comparison. Pure."""
    if not failed or df.empty:
        return df
    test = pd.to_numeric(df["test"], errors="coerce")
    repeat = pd.to_numeric(df["repeat"], errors="coerce")
    keys = pd.Series(list(zip(test, repeat, strict=True)), index=df.index)
    return df[~keys.isin(failed)]


def load(run_dirs: Sequence[Path], include_failed: bool = False) -> Runs:
    """The runs' results (without their failed repeats' rows unless `include_failed`) and
    manifests."""
    frames, manifests, excluded = [], {}, 0
    for run in map(Path, run_dirs):
        rundir = RunDir(run)
        manifest = rundir.read_manifest().to_dict()  # upgraded to this version
        manifests[manifest.get("run_id") or run.name] = manifest
        text = rundir.read_results_text()
        if text:
            df = _results(text, run / RESULTS)
            if not include_failed:
                kept = without_failed(df, failed_repeats(manifest))
                excluded += len(df) - len(kept)
                df = kept
            frames.append(df)
    if not frames or all(f.empty for f in frames):
        raise UserError("no results in " + ", ".join(map(str, run_dirs)) +
                        (" (every repeat failed; --include-failed shows what they parsed)"
                         if excluded else " (every repeat failed, or try `k8sdds parse`)"))
    return Runs(typed(pd.concat(frames, ignore_index=True)), manifests, excluded)


def typed(df: pd.DataFrame) -> pd.DataFrame:
    """The table with every column of the schema: booleans from their text, a column an
    older k8sdds did not write (or left empty) filled with its value for old runs."""
    for name in NAMES:
        col = BY_NAME[name]
        if name not in df:
            df[name] = col.old
        elif col.param and col.old is not None:
            # a column left empty in every row reads as floats: give it its own type first
            values = df[name].astype(object) if col.type is str else df[name]
            df[name] = values.fillna(col.old)
            if col.type is int:
                df[name] = df[name].astype(int)
    for name in BOOLEANS:
        df[name] = df[name].astype(str).str.lower().eq("true")
    df["streams"] = df["streams"].astype(int)
    return df


def table_of(rows: Sequence[dict]) -> pd.DataFrame:
    """A results table from rows as results.csv holds them (text; the service's database
    keeps each row so), typed as a run's table is."""
    df = pd.DataFrame([upgrade_row(dict(r)) for r in rows])
    for name in NAMES:
        if name in df and BY_NAME[name].type in (int, float):
            df[name] = pd.to_numeric(df[name].replace("", np.nan))
    return typed(df)


def _results(text: str, path: Path) -> pd.DataFrame:
    """A run's results table; RunDirError naming the file for a damaged one."""
    import io

    from k8sdds.errors import RunDirError

    try:
        df = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise RunDirError(f"{path}: not a results table k8sdds wrote: "
                          f"{' '.join(str(exc).split())}") from None
    missing = [c for c in ("test", "repeat", "role", "kind", "metric", "value", "datapath")
               if c not in df]
    if missing:
        raise RunDirError(f"{path}: no column {', '.join(missing)}; not a results table "
                          "k8sdds wrote (`k8sdds parse` rebuilds it from the logs)")
    text = df["value"]
    df["value"] = df["value"].map(_number).astype(float)
    df = upgrade_frame(df)  # a latency an older k8sdds stored as printed: a round trip
    bad = df.index[df["value"].isna() | ~np.isfinite(df["value"].fillna(0))]
    if len(bad):
        raise RunDirError(f"{path}, line {bad[0] + 2}: value {text[bad[0]]!r} is not a "
                          "finite number (`k8sdds parse` rebuilds the table from the logs)")
    return df


def _number(cell) -> float:
    try:
        return float(cell)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def summaries(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The summary rows of one metric."""
    return df[(df["kind"] == "summary") & (df["metric"] == metric)]


MEASURING = ("sub", "client")  # roles whose summaries are the measurement: subscribers, and
# the client of a network engine (its output holds both ends)
ROUND_TRIPS = ("pub", "client")  # roles that measure round trips (ddsperf's ping side)


def repeat_values(df: pd.DataFrame, metric: str, roles: str | tuple[str, ...] = MEASURING
                  ) -> pd.DataFrame:
    """One value per repeat: the summary of `metric`, averaged over the measuring roles
    (roles starting with `roles`). Only means are averaged here; for latency percentiles
    there is one role (the publisher, or the client), so nothing is combined."""
    s = summaries(df, metric)
    s = s[s["role"].str.startswith(roles)]
    if s.empty:  # typed, so boolean masks on it stay masks
        return pd.DataFrame(columns=PARAMS + REPEAT + ["value"]).astype(
            {c: bool for c in BOOLEANS})
    return s.groupby(PARAMS + REPEAT, as_index=False, dropna=False)["value"].mean()


def intervals(df: pd.DataFrame) -> pd.DataFrame:
    """Per-interval latency quantiles (min, p50, p90, p99, max, cnt), one row per printed
    ddsperf line, with the test parameters and the repeat."""
    wanted = {f"latency_us_{k}": k for k, _ in QUANTILES} | {"roundtrips": "cnt"}
    s = df[(df["kind"] == "sample") & df["metric"].isin(list(wanted))].copy()
    if s.empty:
        return pd.DataFrame()
    # several pongs print one line each per second: the k-th value of each metric at the same
    # t belongs to the k-th line
    keys = PARAMS + REPEAT + ["role", "t"]
    s["line"] = s.groupby(keys + ["metric"], dropna=False).cumcount()
    wide = s.pivot_table(index=keys + ["line"], columns="metric", values="value",
                         aggfunc="first").reset_index().rename(columns=wanted)
    return wide.dropna(subset=list(wanted.values()))


def pooled_quantile(rows: pd.DataFrame, q: float) -> float:
    """The q-quantile of the distribution pooled from interval rows (see latency_cdf)."""
    x, f = latency_cdf(rows.to_dict("records"), points=2000)
    if not len(x):
        return float("nan")
    return float(np.interp(q, f, x))
