"""Which two runs k8sdds compares, and on what: compare's rule, in one place for the CLI
(`k8sdds compare`), the service's `/api/compare` and its `/compare` page. Runs whose
measured nodes differ (kernel, CPU, the CNI and its version: their fingerprints), or whose
engine versions, backend or profiles differ, measure those, not the change under test
(pyperf's spirit), so they are refused unless forced. The controller (the computer k8sdds
ran on, `manifest.environment`) is context: its differences are shown, and judged on only
where the runs hold no fingerprint of a node both measured (older runs, imported trees).
The nodes' other fingerprint fields are shown beside a comparison, or refused on request.
Imports nothing heavy: the CLI reads its defaults at start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from k8sdds.errors import UserError

if TYPE_CHECKING:
    from k8sdds.analysis.load import Runs

# what must be the same on each node both runs measured, by its fingerprint (the node's
# name; the CNI by datapath and node): a difference there is in what was measured
NODE_SAME = (("kernel", lambda fp: fp.get("kernel")),
             ("CPU model", lambda fp: fp.get("cpu_model")),
             ("CPUs", lambda fp: fp.get("cpu_count")))
CNI_SAME = ("name", "version")
# what must be the same of the runs as a whole
RUN_SAME = (("engine versions", lambda m: m.get("tools") or {},),
            ("backend", lambda m: m.get("backend"),),
            ("profiles", lambda m: sorted({str(n.get("profile")) for n in
                                           (m.get("cluster") or {}).get("nodes", [])}),))
# the controller, the computer k8sdds ran on (`manifest.environment`): context, or judged
# on where the runs hold no fingerprint of a node both measured
CONTROLLER = (("CPU model", lambda m: (m.get("environment") or {}).get("cpu_model"),),
              ("CPUs", lambda m: (m.get("environment") or {}).get("cpu_count"),),
              ("memory", lambda m: (m.get("environment") or {}).get("memory"),),
              ("kernel", lambda m: (m.get("environment") or {}).get("kernel"),))


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

    differences: tuple[str, ...]  # of what was measured: compared only with force
    fingerprints: tuple[str, ...]  # the nodes' other fields: shown beside the comparison
    controller: tuple[str, ...] = ()  # of the computer k8sdds ran on: context


def admit(baseline: Runs, contender: Runs, names: tuple[str, str], force: bool = False,
          same_fingerprint: bool = False,
          options: Mapping[str, str] = CLI_OPTIONS) -> Admitted:
    """compare's rule, the one every caller applies: runs whose measured nodes differ in
    kernel, CPU or CNI version, or whose engine versions, backends or profiles differ, are
    refused unless `force`; runs on nodes whose other fingerprint fields differ (MTU,
    offloads, sysctls, governor, runtime) are compared, the differences shown, unless
    `same_fingerprint` refuses them. `names` are the runs as the caller named them,
    `options` how it spells the options."""
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
    context = _read(CONTROLLER, a, b) if _common_nodes(a, b) else []
    return Admitted(tuple(differ), tuple(printed), tuple(context))


def differences(baseline: dict, contender: dict) -> list[str]:
    """What differs between the two runs' manifests beyond the tests, of what was measured:
    one line each. The nodes both measured are judged by their fingerprints; without one,
    the controller ("the controller's kernel: ...")."""
    out = _read(RUN_SAME, baseline, contender)
    if _common_nodes(baseline, contender):
        return out + _nodes(baseline, contender)
    return out + [f"the controller's {line}" for line in _read(CONTROLLER, baseline, contender)]


def _read(fields, baseline: dict, contender: dict) -> list[str]:
    out = []
    for name, read in fields:
        a, b = read(baseline), read(contender)
        if name == "engine versions":  # only the engines both runs used
            a, b = ({k: v for k, v in a.items() if k in b}, {k: v for k, v in b.items()
                                                              if k in a})
        if a != b:
            out.append(f"{name}: {_show(a)} against {_show(b)}")
    return out


def _by_node(manifest: dict) -> dict[str, dict]:
    """Each node's fingerprint, by its name (the first datapath's: a node's kernel and CPU
    do not change with the datapath), fingerprints that hold an error left out."""
    out: dict[str, dict] = {}
    for _, nodes in sorted((manifest.get("fingerprints") or {}).items()):
        for name, fp in nodes.items():
            if isinstance(fp, Mapping) and "kernel" in fp:
                out.setdefault(name, fp)
    return out


def _common_nodes(a: dict, b: dict) -> set[str]:
    return _by_node(a).keys() & _by_node(b).keys()


def _nodes(baseline: dict, contender: dict) -> list[str]:
    """`kernel: 6.1.0 against 6.12.0 (node1, node2)`: each field of NODE_SAME, and the CNI
    of each datapath both measured, that differs on a node both runs measured."""
    fa, fb = _by_node(baseline), _by_node(contender)
    found: dict[tuple[str, str, str], list[str]] = {}
    for node in sorted(fa.keys() & fb.keys()):
        for name, read in NODE_SAME:
            a, b = read(fa[node]), read(fb[node])
            if a != b:
                found.setdefault((name, _show(a), _show(b)), []).append(node)
    pa, pb = baseline.get("fingerprints") or {}, contender.get("fingerprints") or {}
    for datapath in sorted(pa.keys() & pb.keys()):
        for node in sorted(pa[datapath].keys() & pb[datapath].keys()):
            ca, cb = ((p[datapath][node].get("cni") or {}) for p in (pa, pb))
            a, b = (" ".join(str(c[k]) for k in CNI_SAME if k in c) for c in (ca, cb))
            if a and b and a != b:
                found.setdefault((f"CNI on {datapath}", a, b), []).append(node)
    return [f"{name}: {a} against {b} ({', '.join(nodes)})"
            for (name, a, b), nodes in found.items()]


def _show(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(value) or "-"
    return "-" if value is None else str(value)
