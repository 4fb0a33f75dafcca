"""The task queue of `k8sdds serve`: schedules submitted over the API, kept in the database
(nothing is lost when the service stops), run one at a time per target (a testbed, a cluster
context, an inventory) by `k8sdds run` in a child process, followed (progress from the run's
manifest), and imported when they end.

The child dies with the service (PR_SET_PDEATHSIG: SIGTERM, which `k8sdds run` takes as a
clean stop); a task found running at start is resumed (`k8sdds run --resume`), as after
Ctrl-C. A cancel is SIGINT: the run stops cleanly and can be resumed later."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine, insert, select, update

from k8sdds.errors import UserError
from k8sdds.order import ORDERS
from k8sdds.serve import store
from k8sdds.serve.schema import tasks

STATES = ("queued", "running", "done", "failed", "cancelled")
NAME = r"^[A-Za-z0-9][A-Za-z0-9,._-]*$"  # never an option: no leading '-'
PATH = r"^/[^\x00\n]*$"


class TaskOptions(BaseModel):
    """The run options a task may set (those of `k8sdds run`; anything else is refused)."""

    model_config = ConfigDict(extra="forbid")
    backend: Literal["emulated", "kubernetes", "ssh"] = "emulated"
    datapath: str | None = Field(None, pattern=NAME, max_length=256)
    transport: str | None = Field(None, pattern=NAME, max_length=64)
    repeats: int | None = Field(None, ge=1, le=100)
    duration: float | None = Field(None, gt=0, le=86400)
    profile: str | None = Field(None, pattern=NAME, max_length=64)
    testbed: str | None = Field(None, pattern=NAME, max_length=64)
    nodes: int | None = Field(None, ge=2, le=64)
    kubeconfig: str | None = Field(None, pattern=PATH, max_length=4096)
    context: str | None = Field(None, pattern=NAME, max_length=256)
    namespace: str | None = Field(None, pattern=NAME, max_length=63)
    inventory: str | None = Field(None, pattern=PATH, max_length=4096)
    pub_node: str | None = Field(None, pattern=NAME, max_length=253)
    sub_nodes: str | None = Field(None, pattern=NAME, max_length=4096)
    order: Literal[tuple(ORDERS)] | None = None  # `k8sdds run --order`
    # a baseline's own (`k8sdds baseline`): a network test between two named nodes is
    # engines=iperf3 (or ping, qperf), one path, pub_node and sub_nodes
    engines: str | None = Field(None, pattern=NAME, max_length=64)
    paths: str | None = Field(None, pattern=NAME, max_length=256)
    dds: bool | None = None

    def argv(self, kind: str) -> list[str]:
        """`k8sdds run` (or `baseline`) options, each as one `--name=value` word (no shell,
        no option injection)."""
        others = {"schedule": ("engines", "paths", "dds"),
                  "baseline": ("transport", "order")}[kind]
        wrong = [n for n in others if getattr(self, n) is not None]
        if wrong:
            raise UserError(f"{', '.join(wrong)}: not an option of a {kind} task "
                            f"(`k8sdds {'run' if kind == 'schedule' else 'baseline'}` has "
                            "no such flag)")
        out = [f"--backend={self.backend}"]
        for name, value in self.model_dump(exclude={"backend"}).items():
            flag = "--" + name.replace("_", "-")
            if value is True or value is False:
                out.append(flag if value else f"--no-{name}")
            elif value is not None:
                out.append(f"{flag}={value}")
        return out

    def target(self) -> str:
        """What a run occupies: one run at a time on it."""
        if self.backend == "kubernetes":
            return f"kubernetes:{self.kubeconfig or '~/.kube/config'}:{self.context or ''}"
        if self.backend == "ssh":
            return f"ssh:{self.inventory}"
        return f"emulated:{self.testbed or 'k8sdds'}"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _die_with_parent() -> None:
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Worker:
    """Runs the queue in a thread of the service."""

    def __init__(self, engine: Engine, out: Path, poll: float = 0.5):
        self.engine, self.out, self.poll = engine, Path(out), poll
        self.children: dict[int, subprocess.Popen] = {}
        self.cancelled: set[int] = set()
        self._stop = threading.Event()
        self._wake = threading.Event()  # a task queued or resumed: launch it now
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ---- the API's side ----------------------------------------------------------------
    def submit(self, schedule: str, options: TaskOptions, kind: str = "schedule") -> int:
        """Queue a schedule (checked as `k8sdds run` checks it: a UserError says why) or a
        baseline."""
        from k8sdds.schedule import loads

        options.argv(kind)  # a baseline's option on a schedule: refused now, not later
        if kind == "schedule":
            loads(schedule, "schedule")
        with self.engine.begin() as conn:
            task_id = conn.execute(insert(tasks).values(
                kind=kind, status="queued", target=options.target(), schedule=schedule,
                options=options.model_dump(exclude_none=True), created=_now(),
                message="")).inserted_primary_key[0]
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
            with self.engine.begin() as conn:
                return conn.execute(update(tasks).where(
                    tasks.c.id == task_id, tasks.c.status == "queued").values(
                    status="cancelled", finished=_now(), message="cancelled before it ran")
                ).rowcount == 1

    def resume(self, task_id: int) -> bool:
        """Queue a cancelled or failed task again: its run continues where it stopped."""
        with self.engine.begin() as conn:
            queued = conn.execute(update(tasks).where(
                tasks.c.id == task_id, tasks.c.status.in_(("cancelled", "failed"))).values(
                status="queued", finished=None, message="resumed")).rowcount == 1
        self._wake.set()
        return queued

    # ---- the loop ----------------------------------------------------------------------
    def start(self) -> None:
        with self.engine.begin() as conn:  # in flight when the service stopped: resumed
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
            # progress is read from files: followed every `poll` s; a new task wakes it
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
        with self.engine.connect() as conn:
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
            options = TaskOptions(**task.options).argv(task.kind)
            if task.kind == "baseline":  # no resume: a stopped one starts again
                argv = ["baseline", "--out", str(folder), *options, "--json", "--quiet"]
            elif run is not None:
                argv = ["run", "--resume", str(run), "--json", "--quiet", "--no-plot"]
            else:
                (folder / "schedule.csv").write_text(task.schedule)
                argv = ["run", "--sch", str(folder / "schedule.csv"), "--out", str(folder),
                        *options, "--json", "--quiet", "--no-plot"]
            with open(folder / "run.log", "ab") as log:
                child = subprocess.Popen([sys.executable, "-m", "k8sdds", *argv],
                                         stdout=subprocess.DEVNULL, stderr=log,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
            with self._lock:
                self.children[task.id] = child
            with self.engine.begin() as conn:
                conn.execute(update(tasks).where(tasks.c.id == task.id).values(
                    status="running", started=task.started or _now(), message=""))

    def _follow(self) -> None:
        for task_id, child in list(self.children.items()):
            run = self.run_dir(task_id)
            values: dict = {}
            if run is not None:
                values.update(run_id=run.name, **_progress(run))
            code = child.poll()
            if code is not None:
                with self._lock:
                    del self.children[task_id]
                    cancelled = task_id in self.cancelled
                    self.cancelled.discard(task_id)
                if run is not None and code in (0, 1):
                    store.import_run(self.engine, run)  # once: the run id is the key
                values.update(finished=_now(), status=(
                    "cancelled" if cancelled else "done" if code in (0, 1) else "failed"),
                    message=_tail(self.task_dir(task_id) / "run.log") if code else "")
            if values:
                with self.engine.begin() as conn:
                    conn.execute(update(tasks).where(tasks.c.id == task_id).values(**values))


def _progress(run: Path) -> dict:
    """Repeats ended and repeats in all, from the run's manifest."""
    from k8sdds.results.rundir import RunDir

    try:
        manifest = RunDir(run).read_manifest()
    except Exception:  # noqa: BLE001 - being written: the next round reads it
        return {}
    return {"done": len(manifest.repeats),
            "total": sum(t.repeats for t in manifest.tests)}


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
    task.pop("schedule")
    return task


def list_tasks(engine: Engine) -> list[dict]:
    with engine.connect() as conn:
        return [describe(r) for r in conn.execute(select(tasks).order_by(tasks.c.id.desc()))]


def get_task(engine: Engine, task_id: int) -> dict | None:
    with engine.connect() as conn:
        row = conn.execute(select(tasks).where(tasks.c.id == task_id)).first()
    return describe(row) if row else None


