#!/usr/bin/env python3
"""The K8sDDS command line, kept working: `python3 perftest.py --sch schedule.csv ...`.

Its options (--sch --fromI --toI --latencyTest --noPrint --sendQueueSize --transport --secure
--peers) are those of `k8sdds run`, which does the work. With any `python3`: where k8sdds is
not importable, the script runs again in the project's virtualenv (`make install` makes it).
"""

import os
import sys
from pathlib import Path

VENV = Path(__file__).resolve().parent / ".venv"
AGAIN = "K8SDDS_PERFTEST_REEXEC"  # set once re-executed: never a second time


def _in_venv() -> bool:
    """Whether this interpreter's environment is the project's virtualenv (its prefix, not
    its binary: a virtualenv's python is often the very same file as the system's)."""
    try:
        return Path(sys.prefix).resolve() == VENV.resolve()
    except OSError:
        return False


try:
    from k8sdds.cli import main
except ImportError as exc:
    python = VENV / "bin" / "python"
    if python.exists() and not _in_venv() and not os.environ.get(AGAIN):
        os.environ[AGAIN] = "1"
        os.execv(str(python), [str(python), str(Path(__file__).resolve()), *sys.argv[1:]])
    where = f" (in {VENV}: {exc})" if _in_venv() or os.environ.get(AGAIN) else ""
    sys.stderr.write(f"k8sdds is not installed{where}: run `make install` (or "
                     "`pip install .`) first\n")
    sys.exit(1)

if __name__ == "__main__":
    os.environ.pop(AGAIN, None)  # the run's own processes start clean
    main(["run", *sys.argv[1:]])
