"""Which two runs k8sdds compares, and on what: compare's rule, in one place for the CLI
(`k8sdds compare`), the service's `/api/compare` and its `/compare` page. Runs made on
different machines, kernels, engine versions, backends or profiles measure those, not the
change under test (pyperf's spirit), so they are refused unless forced; the nodes'
fingerprints are shown beside a comparison, or refused on request. Imports nothing heavy:
the CLI reads its defaults at start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from k8sdds.errors import UserError

if TYPE_CHECKING:
    from k8sdds.analysis.load import Runs

# what must be the same for two runs to be compared (pyperf's spirit: a comparison across
# machines, kernels or engine versions measures those, not the change under test)
SAME = (("machine", lambda m: (m.get("environment") or {}).get("cpu_model"),),
        ("CPUs", lambda m: (m.get("environment") or {}).get("cpu_count"),),
        ("memory", lambda m: (m.get("environment") or {}).get("memory"),),
        ("kernel", lambda m: (m.get("environment") or {}).get("kernel"),),
        ("engine versions", lambda m: m.get("tools") or {},),
        ("backend", lambda m: m.get("backend"),),
        ("profiles", lambda m: sorted({str(n.get("profile")) for n in
                                       (m.get("cluster") or {}).get("nodes", [])}),))


# what is compared when the caller names no metric: throughput and the round trip's median
# and tail (the CLI, the API and the page alike)
DEFAULT_METRICS = ("throughput_mbps", "latency_us_p50", "latency_us_p99")
# how each caller spells the options that lift a refusal
CLI_OPTIONS = {"force": "--force", "same_fingerprint": "--same-fingerprint"}
QUERY_OPTIONS = {"force": "force=true", "same_fingerprint": "same_fingerprint=true"}


class CompareRefused(UserError):
    """Two runs k8sdds does not compare, and why (`admit`)."""


@dataclass(frozen=True)
class Admitted:
    """Two runs that may be compared, and what differs between them all the same."""

    differences: tuple[str, ...]  # of the setup: compared only with force
    fingerprints: tuple[str, ...]  # of the nodes: shown beside the comparison


def admit(baseline: Runs, contender: Runs, names: tuple[str, str], force: bool = False,
          same_fingerprint: bool = False,
          options: Mapping[str, str] = CLI_OPTIONS) -> Admitted:
    """compare's rule, the one every caller applies: runs made on different machines,
    kernels, engine versions, backends or profiles are refused unless `force`; runs on nodes
    whose fingerprints differ (MTU, offloads, sysctls, governor, runtime, CNI version) are
    compared, the differences shown, unless `same_fingerprint` refuses them. `names` are
    the runs as the caller named them, `options` how it spells the options."""
    from k8sdds import fingerprint

    a, b = (next(iter(r.manifests.values())) for r in (baseline, contender))
    differ = differences(a, b)
    if differ and not force:
        raise CompareRefused(f"{names[0]} and {names[1]} were not made alike: "
                             + "; ".join(differ)
                             + f" ({options['force']} compares them all the same)")
    printed = fingerprint.differences(a.get("fingerprints"), b.get("fingerprints"))
    if printed and same_fingerprint:
        raise CompareRefused(f"{names[0]} and {names[1]} ran on nodes whose fingerprints "
                             "differ: " + "; ".join(printed) + " (without "
                             f"{options['same_fingerprint']} they are compared, the "
                             "differences shown)")
    return Admitted(tuple(differ), tuple(printed))


def differences(baseline: dict, contender: dict) -> list[str]:
    """What differs between the two runs' manifests beyond the tests: one line each."""
    out = []
    for name, read in SAME:
        a, b = read(baseline), read(contender)
        if name == "engine versions":  # only the engines both runs used
            a, b = ({k: v for k, v in a.items() if k in b}, {k: v for k, v in b.items()
                                                              if k in a})
        if a != b:
            out.append(f"{name}: {_show(a)} against {_show(b)}")
    return out


def _show(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(value) or "-"
    return "-" if value is None else str(value)
