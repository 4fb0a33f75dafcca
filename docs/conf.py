"""Sphinx configuration of the k8sdds documentation (`make docs`; `make test` builds it with
warnings as errors). Markdown through MyST; the CLI and API reference are generated from the
code by `_ext/k8sdds_reference.py`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

from k8sdds import __version__  # noqa: E402

project = "k8sdds"
author = "the k8sdds authors"
release = __version__
extensions = ["myst_parser", "k8sdds_reference"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_ext"]
html_theme = "furo"
html_title = f"k8sdds {release}"
html_static_path: list[str] = []
suppress_warnings = ["myst.header"]  # pages moved from the README start deeper than h2
