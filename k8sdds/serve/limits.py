"""The limits a client of `k8sdds serve` can push against, beyond the API's own bounds
(offsets, ids, body size): how long a submitted task may measure. Pure."""

from __future__ import annotations

from k8sdds import model

DEFAULT_MAX_SECONDS = 7 * 24 * 3600.0  # the longest a submitted task may measure: a week


def planned_seconds(tests) -> float:
    """How long a run's tests measure: each test's duration times its repeats (setup and
    teardown come on top). Pure."""
    return float(sum(t.duration * t.repeats for t in tests))


def baseline_seconds(options) -> float:
    """At most how long a baseline task measures: every probe of its engines on every path
    of its datapaths (every datapath k8sdds knows when none is given), as `k8sdds baseline`
    would run them with the task's duration and repeats. Pure."""
    from k8sdds import baseline

    datapaths = len([d for d in (options.datapath or "").split(",") if d.strip()]) \
        or len(model.DATAPATHS)
    paths = (len(model.PATHS) if (options.paths or "all").strip().lower() == "all"
             else len([p for p in options.paths.split(",") if p.strip()]))
    duration = options.duration or 5.0
    engines = ([e for e in options.engines.split(",") if e.strip()] if options.engines
               else list(baseline.ENGINES))
    per_path = sum(duration * len(baseline.PROBES.get(e, (1,))) for e in engines)
    if options.dds is not False:
        per_path += max(duration, baseline.DDS_MIN_DURATION) * len(baseline.PROBES["ddsperf"])
    return float(datapaths * paths * per_path * (options.repeats or 1))
