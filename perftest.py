#!/usr/bin/env python3
"""The K8sDDS command line, kept working: `python3 perftest.py --sch schedule.csv ...`.

Its options (--sch --fromI --toI --latencyTest --noPrint --sendQueueSize --transport --secure
--peers) are those of `k8sdds run`, which does the work.
"""

import os
import sys
from pathlib import Path

try:
    from k8sdds.cli import main
except ImportError:  # not installed in this interpreter: use the project's virtualenv
    venv_python = Path(__file__).resolve().parent / ".venv" / "bin" / "python"
    if venv_python.exists() and Path(sys.executable).resolve() != venv_python.resolve():
        os.execv(str(venv_python), [str(venv_python), *sys.argv])
    sys.exit("k8sdds is not installed: run `make install` (or `pip install .`) first")

if __name__ == "__main__":
    main(["run", *sys.argv[1:]])
