"""The run directories in `k8sdds serve --out`, added to the database by themselves: those
there when the service starts, and those that appear while it runs (a `k8sdds run --out`
beside it), each once, as `--add-runs` adds them. A run still running is left until it
ends; a damaged one is kept with its reason, for the runs page, and said once in the log."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from sqlalchemy import Engine

from k8sdds.errors import UserError

log = logging.getLogger("k8sdds.serve")


class Watcher:
    """Adds `out`'s finished run directories every `interval` seconds, on a thread."""

    def __init__(self, db: Engine, out: Path, interval: float,
                 include_failed: bool = False):
        self.db, self.out, self.interval = db, Path(out), interval
        self.include_failed = include_failed
        self.refused: dict[str, str] = {}  # run directory name -> why it was not added
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep(self) -> list[str]:
        """Add what is new and finished; the names added."""
        from k8sdds.errors import RunDirError
        from k8sdds.serve.store import add_run

        added = []
        for path in sorted(p for p in self.out.iterdir() if p.name not in self._seen
                           and (p / "manifest.json").is_file()):
            if _running(path):
                continue  # its manifest is still being written: next time
            self._seen.add(path.name)
            try:
                if add_run(self.db, path, self.include_failed):
                    added.append(path.name)
            except (RunDirError, UserError, OSError) as exc:
                self.refused[path.name] = str(exc)
                log.warning("not added: %s", exc)
        return added

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="k8sdds-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            try:
                self.sweep()
            except Exception:  # a database down for a moment: said, tried again
                log.exception("adding the runs in %s failed; trying again", self.out)
            if self._stop.wait(self.interval):
                return


def _running(path: Path) -> bool:
    """Whether the run's manifest says it is still running (an unreadable one is not: it
    is refused with its reason when added)."""
    try:
        return json.loads((path / "manifest.json").read_text()).get("status") == "running"
    except (OSError, ValueError, AttributeError):
        return False
