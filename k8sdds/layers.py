"""Which package may import which: the layering rule, as data. A package imports only from
layers below its own (never one of its own layer), so the packages, as the modules, have no
cycle. `tests/test_layout.py` checks the import graph against it; the docs' module reference
is drawn from it and from the modules' docstrings. A leaf: it imports nothing."""

from __future__ import annotations

# bottom first; a name is a package of k8sdds or a top-level module (without .py)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("guarded", "flags", "caches", "layers"),
    ("cni",),
    ("model",),
    ("capacity",),  # the capacity a load share is taken of: expansion adds its tests
    ("order", "environment", "fingerprint", "parsers", "stopping", "expansion"),
    ("results",),
    ("certs",),
    ("engines",),
    ("schedule", "records", "baseline"),
    ("reparse", "importer", "analysis", "run_flags"),
    ("images",),  # the places: the images, then what runs them, then the backends
    ("testbed", "cluster"),
    ("vm",),  # a machine to try the cluster commands on (asks cluster.remote whether sshd is up)
    ("deployment",),
    ("repeat",),  # one repeat's life, which the runner drives
    ("runner",),
    ("request",),
    ("serve",),
    ("cli", "k8sdds"),
    ("__main__",),
)
