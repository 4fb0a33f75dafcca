"""The tasks: a schedule or a baseline submitted, listed, shown, cancelled, resumed."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, ConfigDict

from k8sdds.errors import UserError
from k8sdds.serve.options import TaskOptions
from k8sdds.serve.routes.common import (
    COMMON,
    MAX_BODY,
    Service,
    TaskId,
    authorized,
    errors,
    queue,
    service,
)
from k8sdds.serve.tasks import Worker, get_task, list_tasks

router = APIRouter(dependencies=[Depends(authorized)])


class TaskRequest(BaseModel):
    """A schedule (the CSV text `k8sdds run --sch` reads) and the run's options; or a
    baseline (`k8sdds baseline`: its options, no schedule)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["schedule", "baseline"] = "schedule"
    schedule: str = ""
    options: TaskOptions = TaskOptions()


# what a CSV body must be before its rows are read: not empty, its first line the columns'
# names (the K8sDDS five among them), then a row or more; the rows' values are checked as
# `k8sdds run` checks them (a 422 with the reason)
CSV_SCHEDULE = {
    "type": "string", "minLength": 1,
    "pattern": r"^(?=[^\n]*dataLen)(?=[^\n]*multicast)(?=[^\n]*numSubscribers)"
               r"(?=[^\n]*bestEffort)(?=[^\n]*batchSize)[A-Za-z_,]+\r?\n[^\n]+",
    "description": "A schedule: a header line naming the columns (dataLen, multicast, "
                   "numSubscribers, bestEffort, batchSize and any optional ones), then one "
                   "row a test. Rows are checked as `k8sdds run` checks them."}


@router.post("/api/tasks", status_code=201,
             responses=errors(*COMMON, 411, 503), openapi_extra={"requestBody": {
                 "required": True, "content": {
                     "application/json": {"schema": {
                         "$ref": "#/components/schemas/TaskRequest"}},
                     "text/csv": {"schema": CSV_SCHEDULE}}}})
async def submit(request: Request):
    """Queue a schedule: a JSON body {"schedule": CSV text, "options": {...}}, or the CSV
    itself (Content-Type text/csv) with the default options. The schedule is checked as
    `k8sdds run` checks it: a mistake is a 422 with the same message."""
    from pydantic import ValidationError

    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise HTTPException(413, f"request body over {MAX_BODY} bytes")
    try:
        text = raw.decode()
        if request.headers.get("content-type", "").startswith("text/csv"):
            body = TaskRequest(schedule=text)
        else:
            body = TaskRequest.model_validate_json(raw)
    except (UnicodeDecodeError, ValidationError) as exc:
        raise HTTPException(422, " ".join(str(exc).split())[:1000]) from None
    try:
        task_id = queue(request).submit(body.schedule, body.options, body.kind)
    except UserError as exc:
        raise HTTPException(422, str(exc)) from None
    return get_task(service(request).db, task_id)


@router.get("/api/tasks", responses=errors(*COMMON))
def tasks_list(svc: Service = Depends(service)):
    """Every task, newest first: status, progress (repeats done of total), ETA."""
    return list_tasks(svc.db)


@router.get("/api/tasks/{task_id}", responses=errors(*COMMON, 404))
def task(task_id: TaskId, svc: Service = Depends(service)):
    found = get_task(svc.db, task_id)
    if found is None:
        raise HTTPException(404, f"no task {task_id}")
    return found


@router.post("/api/tasks/{task_id}/cancel", responses=errors(*COMMON, 409, 411, 503))
def cancel(task_id: TaskId, worker: Worker = Depends(queue),
           svc: Service = Depends(service)):
    """A clean stop (as Ctrl-C): the run keeps what it measured and can be resumed."""
    if not worker.cancel(task_id):
        raise HTTPException(409, f"task {task_id} is not queued or running")
    return get_task(svc.db, task_id)


@router.post("/api/tasks/{task_id}/resume", responses=errors(*COMMON, 409, 411, 503))
def resume(task_id: TaskId, worker: Worker = Depends(queue),
           svc: Service = Depends(service)):
    """Queue a cancelled or failed task again; its run continues where it stopped."""
    if not worker.resume(task_id):
        raise HTTPException(409, f"task {task_id} is not cancelled or failed")
    return get_task(svc.db, task_id)
