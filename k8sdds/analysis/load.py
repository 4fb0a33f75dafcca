"""Load the tidy results table of one or more runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from k8sdds.errors import UserError
from k8sdds.results import RESULTS


def results(run_dirs: Sequence[Path]) -> pd.DataFrame:
    """All rows of results.csv of each run directory, concatenated."""
    frames = []
    for run in run_dirs:
        path = Path(run) / RESULTS
        if not path.exists():
            raise UserError(f"{run}: no {RESULTS} (is this a run directory? try `k8sdds parse`)")
        frames.append(pd.read_csv(path))
    return pd.concat(frames, ignore_index=True)


def summaries(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The summary rows of one metric."""
    return df[(df["kind"] == "summary") & (df["metric"] == metric)]
