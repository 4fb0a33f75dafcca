"""Where k8sdds keeps what it builds once and reuses (a leaf: one owner for the caches and
their environment variables, read by the engines, the testbed cluster and the images)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = "/var/cache/k8sdds"  # K8SDDS_CACHE overrides


BIN = f"{ROOT}/bin"  # the built programs, whatever K8SDDS_CACHE says (a cold image cache
# for a benchmark keeps the programs)


def root() -> Path:
    """The cache's root ($K8SDDS_CACHE): the Go and cargo caches and the images."""
    return Path(os.environ.get("K8SDDS_CACHE", ROOT))


def k8s_bin() -> Path:
    """The Kubernetes parts .ci/k8s-test-binaries builds ($K8SDDS_K8S_BIN, else BIN)."""
    return Path(os.environ.get("K8SDDS_K8S_BIN", BIN))


def engine_bin() -> Path:
    """The engines `make engines` builds ($K8SDDS_ENGINE_BIN, else BIN)."""
    return Path(os.environ.get("K8SDDS_ENGINE_BIN", BIN))


def images() -> Path:
    """The image archives k8sdds builds (images/ under the root)."""
    return root() / "images"
