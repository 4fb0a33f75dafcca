"""A repeat's raw logs -> tidy result rows; used by the runner and by `k8sdds parse`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from k8sdds import parsers, perftest
from k8sdds.parsers import Parsed
from k8sdds.schedule import Test


def parse_logs(test: Test, rep_dir: Path, roles: list[str]) -> dict[str, Parsed]:
    """Parse each role's log of one repeat (a missing log parses as a failure)."""
    parse = parsers.PARSERS[perftest.ENGINES[test.engine].parser]
    out = {}
    for role in roles:
        log = rep_dir / f"{role}.log"
        if not log.exists():
            out[role] = Parsed(failure=f"no log {log.name}")
            continue
        text = log.read_text(errors="replace")
        out[role] = parse(text, role, test.latency_test)
    return out


def rows(run_id: str, backend: str, test: Test, repeat: int, nodes: Mapping[str, str],
         parsed: Mapping[str, Parsed]) -> list[dict[str, Any]]:
    """One row per measured value, in the column order of results.COLUMNS."""
    base = {"run_id": run_id, "test": test.number, "repeat": repeat, "backend": backend,
            "path": test.effective_path, **test.params()}
    base["row"] = test.row
    out = []
    for role, result in parsed.items():
        for v in result.all_values():
            out.append({**base, "role": role, "node": nodes.get(role, ""), "kind": v.kind,
                        "t": v.t, "metric": v.metric, "value": v.value, "unit": v.unit})
    return out
