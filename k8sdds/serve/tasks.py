"""The task queue of `k8sdds serve`: schedules and baselines submitted over the API, kept in
the database (nothing is lost when the service stops), run one at a time per target (a
testbed, a cluster context, an inventory: the backend's options say) by `k8sdds run
--request FILE` in a child process (the request kept once, as the text of the task's
`request.json`, checked where it enters and where it runs), followed (progress from the
run's events), and added to the runs table when they end.

The child dies with the service (PR_SET_PDEATHSIG: SIGTERM, which `k8sdds run` takes as a
clean stop); a task found running at start is resumed (`k8sdds run --resume`), as after
Ctrl-C. A cancel is SIGINT: the run stops cleanly and can be resumed later."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

from sqlalchemy import Engine, insert, select, update

from k8sdds.errors import UserError
from k8sdds.request import OptionError, RunRequest, dumps, prepare
from k8sdds.serve import store
from k8sdds.serve.limits import DEFAULT_MAX_SECONDS, planned_seconds
from k8sdds.serve.options import TaskOptions
from k8sdds.serve.schema import tasks


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _die_with_parent() -> None:
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Worker:
    """Runs the queue in a thread of the service."""

    def __init__(self, db: Engine, out: Path, poll: float = 0.5,
                 max_seconds: float = DEFAULT_MAX_SECONDS):
        self.db, self.out, self.poll = db, Path(out), poll
        self.max_seconds = max_seconds  # a schedule that would measure longer is refused
        self.children: dict[int, subprocess.Popen] = {}
        self.cancelled: set[int] = set()
        self.readers: dict[int, threading.Thread] = {}  # a running task's events reader
        self._stop = threading.Event()
        self._wake = threading.Event()  # a task queued or resumed: launch it now
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ---- the API's side ----------------------------------------------------------------
    def submit(self, schedule: str, options: TaskOptions, kind: str = "schedule") -> int:
        """Queue a schedule (checked as `k8sdds run` checks it, with the chosen backend's own
        limits: a UserError says why) or a baseline."""
        try:
            asked = options.request(schedule, kind)
            prepared = prepare(asked)
        except OptionError as exc:
            raise UserError(f"{exc.option.lstrip('-')}: {exc}") from None
        seconds = planned_seconds(prepared.tests)
        what = (f"the {'schedule' if kind == 'schedule' else 'baseline'} would measure for "
                f"{seconds:g} s ({len(prepared.tests)} tests")
        if seconds > self.max_seconds:
            raise UserError(f"{what}, their durations times their repeats), over this "
                            f"service's ceiling of {self.max_seconds:g} s (k8sdds serve "
                            "--max-task-seconds)")
        with self.db.begin() as conn:
            task_id = conn.execute(insert(tasks).values(
                kind=kind, status="queued", target=options.target(), created=_now(),
                request=dumps(replace(asked, out=HERE)), message="")
            ).inserted_primary_key[0]
        self._wake.set()
        return task_id

    def cancel(self, task_id: int) -> bool:
        """SIGINT to a running task (a clean stop), or a queued one never started."""
        with self._lock:
            child = self.children.get(task_id)
            if child is not None:
                self.cancelled.add(task_id)
                child.send_signal(signal.SIGINT)
                return True
            with self.db.begin() as conn:
                return conn.execute(update(tasks).where(
                    tasks.c.id == task_id, tasks.c.status == "queued").values(
                    status="cancelled", finished=_now(), message="cancelled before it ran")
                ).rowcount == 1

    def resume(self, task_id: int) -> bool:
        """Queue a cancelled, stopped or failed task again: its run continues where it
        stopped."""
        with self.db.begin() as conn:
            queued = conn.execute(update(tasks).where(
                tasks.c.id == task_id,
                tasks.c.status.in_(("cancelled", "stopped", "failed"))).values(
                status="queued", finished=None, message="resumed")).rowcount == 1
        self._wake.set()
        return queued

    # ---- the loop ----------------------------------------------------------------------
    def start(self) -> None:
        with self.db.begin() as conn:  # in flight when the service stopped: resumed
            conn.execute(update(tasks).where(tasks.c.status == "running").values(
                status="queued", message="resumed after the service restarted"))
        self._thread = threading.Thread(target=self._loop, name="k8sdds-tasks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._follow()
                self._launch()
            except Exception as exc:  # noqa: BLE001 - the loop must outlive one bad round
                print(f"k8sdds serve: task loop: {exc}", file=sys.stderr)
            # a child's end is noticed within `poll` s; a new task wakes it at once
            self._wake.wait(self.poll)
            self._wake.clear()

    def task_dir(self, task_id: int) -> Path:
        return self.out / "tasks" / f"task-{task_id}"

    def run_dir(self, task_id: int) -> Path | None:
        """The task's run directory (the newest: a baseline stopped midway starts again)."""
        folder = self.task_dir(task_id)
        found = [p for p in folder.iterdir() if (p / "manifest.json").is_file()] \
            if folder.is_dir() else []
        return max(found, key=lambda p: p.name) if found else None

    def _launch(self) -> None:
        with self.db.connect() as conn:
            queued = conn.execute(select(tasks).where(tasks.c.status == "queued")
                                  .order_by(tasks.c.id)).all()
            busy = {r.target for r in conn.execute(select(tasks.c.target).where(
                tasks.c.status == "running"))}
        for task in queued:
            if task.target in busy:
                continue  # one run at a time on a testbed or cluster: it waits
            busy.add(task.target)
            folder = self.task_dir(task.id)
            folder.mkdir(parents=True, exist_ok=True)
            run = self.run_dir(task.id)
            if run is not None and task.kind != "baseline":  # a stopped baseline starts again
                asked, text = folder / "resume.json", dumps(RunRequest(resume=run))
            else:  # the request as stored, checked again by the child as it reads it
                asked, text = folder / "request.json", task.request
            staged = asked.with_name(asked.name + ".partial")
            staged.write_text(text)
            staged.replace(asked)
            events, sink = os.pipe()  # the child's progress, as JSON lines
            try:
                with open(folder / "run.log", "ab") as log, \
                        open(folder / OUTCOME, "wb") as outcome:
                    child = subprocess.Popen(
                        [sys.executable, "-m", "k8sdds", "run", f"--request={asked}",
                         "--no-plot", "--json", "--quiet", f"--events=/dev/fd/{sink}"],
                        stdout=outcome, stderr=log, stdin=subprocess.DEVNULL, cwd=folder,
                        pass_fds=(sink,), preexec_fn=_die_with_parent)
            except BaseException:
                os.close(events)
                raise
            finally:
                os.close(sink)
            with self._lock:
                self.children[task.id] = child
            with self.db.begin() as conn:
                conn.execute(update(tasks).where(tasks.c.id == task.id).values(
                    status="running", started=task.started or _now(), message=""))
            reader = threading.Thread(target=self._events, args=(task.id, events),
                                      daemon=True, name=f"k8sdds-task-{task.id}")
            reader.start()
            self.readers[task.id] = reader

    def _events(self, task_id: int, fd: int) -> None:
        """The child's progress events, into the task's row as they come (until it exits)."""
        with os.fdopen(fd, "r", errors="replace") as stream:
            for line in stream:
                values = progress_of(line)
                if values:
                    with self.db.begin() as conn:
                        conn.execute(update(tasks).where(tasks.c.id == task_id).values(
                            **values))

    def _follow(self) -> None:
        for task_id, child in list(self.children.items()):
            code = child.poll()
            if code is None:
                continue
            with self._lock:
                del self.children[task_id]
                cancelled = task_id in self.cancelled
                self.cancelled.discard(task_id)
            reader = self.readers.pop(task_id, None)
            if reader is not None:
                reader.join(timeout=5)  # the pipe is closed: its last events are read
            folder = self.task_dir(task_id)
            said = outcome_of(folder / OUTCOME)
            status, message = ending(code, said, cancelled, _tail(folder / "run.log"))
            values: dict = {"finished": _now(), "status": status, "message": message}
            # the child's run directory, relative to its working directory (the task's folder)
            run = folder / said["run_dir"] if said.get("run_dir") else self.run_dir(task_id)
            if run is not None:
                values["run_id"] = run.name
                if status == "done":
                    store.add_run(self.db, run)  # once: the run id is the key
            with self.db.begin() as conn:
                conn.execute(update(tasks).where(tasks.c.id == task_id).values(**values))


HERE = Path(".")  # a task's run goes into its folder, the child's working directory
OUTCOME = "outcome.json"  # the child's --json outcome (or error), in the task's folder


def progress_of(line: str) -> dict:
    """A task row's progress from one event line of `k8sdds run --events` (pure)."""
    try:
        event = json.loads(line)
    except ValueError:
        return {}
    if not isinstance(event, dict) or event.get("event") not in ("start", "repeat", "stop"):
        return {}
    values = {k: event[k] for k in ("done", "total") if isinstance(event.get(k), int)}
    if event.get("event") == "start" and isinstance(event.get("run_id"), str):
        values["run_id"] = event["run_id"]
    return values


def outcome_of(path: Path) -> dict:
    """What the child printed with --json: its outcome, or its error ({} if nothing)."""
    try:
        said = json.loads(path.read_text(errors="replace") or "{}")
    except (OSError, ValueError):
        return {}
    return said if isinstance(said, dict) else {}


def ending(code: int, said: dict, cancelled: bool, tail: str) -> tuple[str, str]:
    """(status, message) of a task whose child exited with `code` (pure): done when it
    printed its outcome; cancelled when the service stopped it; stopped when the run
    stopped itself and can be resumed (a full disk, an interrupt); failed otherwise."""
    if cancelled:
        return "cancelled", "cancelled"
    if "run_dir" in said and code == 0:
        failed = said.get("failed") or []
        return "done", (f"{len(failed)} of {said.get('repeats', 0)} repeats failed"
                        if failed else "")
    if said.get("kind") == "RunStopped" or code == 130:
        return "stopped", said.get("error") or tail or "interrupted"
    return "failed", said.get("error") or tail or f"exit status {code}"


def _tail(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:500] if lines else ""


def describe(row) -> dict:
    """A task as the API shows it, with its ETA while it runs."""
    task = dict(row._mapping)
    for key in ("created", "started", "finished"):
        task[key] = task[key].isoformat() if task[key] else None
    eta = None
    if row.status == "running" and row.started and row.done and row.total:
        started = row.started if row.started.tzinfo else row.started.replace(
            tzinfo=dt.timezone.utc)
        elapsed = (_now() - started).total_seconds()
        eta = round(elapsed / row.done * (row.total - row.done), 1)
    task["eta_s"] = eta
    task["options"] = asked_options(task.pop("request"))
    return task


def asked_options(text: str) -> dict:
    """A stored request's options as a task is given them (backend, its options, the run's)."""
    asked = json.loads(text)
    return {"backend": asked.get("backend"), **(asked.get("backend_options") or {}),
            **(asked.get("flags") or {}), **(asked.get("matrix") or {})}


def list_tasks(db: Engine) -> list[dict]:
    with db.connect() as conn:
        return [describe(r) for r in conn.execute(select(tasks).order_by(tasks.c.id.desc()))]


def get_task(db: Engine, task_id: int) -> dict | None:
    with db.connect() as conn:
        row = conn.execute(select(tasks).where(tasks.c.id == task_id)).first()
    return describe(row) if row else None


