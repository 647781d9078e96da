"""Long operations as Celery tasks with progress the console can show.

A view calls ``launch``: it records a ``LongTask`` row and queues the task on the
``long`` queue with the row's id as its task id.  The task reports as it goes through a
``Progress`` (``done``/``total``/``note``, kept in the result backend as the PROGRESS
state) and returns its result.  ``status`` reads both back for the API and pages:
state, counts, percentage, note, and the result or error once finished.
"""

from __future__ import annotations

import time
from typing import Any

from celery import Task
from celery.result import AsyncResult
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils import timezone

from console.celery import app
from console.core.models import LongTask

PROGRESS = "PROGRESS"
FINISHED = {"SUCCESS", "FAILURE", "REVOKED"}
# A finished task's outcome stays in Redis this long; the database keeps a copy.
RESULT_EXPIRES_SECONDS = 7 * 24 * 3600


class Progress:
    """How far a running task is; ``advance`` reports at most every ``interval_s`` (and at the end)."""

    def __init__(self, task: Task, total: int, note: str = "", interval_s: float = 0.25) -> None:
        self.task = task
        self.total = total
        self.done = 0
        self.note = note
        self.interval_s = interval_s
        self._reported_at = 0.0
        self._report(force=True)

    def advance(self, count: int = 1, note: str | None = None) -> None:
        self.done += count
        if note is not None:
            self.note = note
        self._report(force=self.done >= self.total)

    def _report(self, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._reported_at < self.interval_s:
            return
        self._reported_at = now
        if self.task.request.id:  # not when called directly, outside a worker
            self.task.update_state(state=PROGRESS, meta=self.meta())

    def meta(self) -> dict[str, Any]:
        return {"done": self.done, "total": self.total, "note": self.note}


def launch(
    task: Task,
    kind: str,
    title: str,
    user: AbstractBaseUser | AnonymousUser | None,
    params: dict[str, Any],
) -> LongTask:
    """Record and queue ``task(long_task_id=..., **params)`` (a ``long_*`` task: the long queue).

    Raises whatever queueing raises (Redis down): the row is deleted again, so no task is
    listed that will never run.
    """
    row = LongTask.objects.create(
        kind=kind, title=title, params=params, requested_by=user if user and user.is_authenticated else None
    )
    try:
        task.apply_async(kwargs={**params, "long_task_id": str(row.id)}, task_id=str(row.id))
    except Exception:
        row.delete()
        raise
    return row


def status(row: LongTask) -> dict[str, Any]:
    """The task's state, progress and outcome, as the API returns it."""
    if row.final_state:
        state, info = row.final_state, row.final_info or {}
    else:
        result = AsyncResult(str(row.id), app=app)
        state, raw = result.state, result.info
        if state == "FAILURE":
            info = {"error": f"{type(raw).__name__}: {raw}"}
        else:
            info = raw if isinstance(raw, dict) else {}
        if state in FINISHED:
            row.final_state, row.final_info, row.finished = state, info, timezone.now()
            row.save(update_fields=["final_state", "final_info", "finished"])
    done, total = info.get("done"), info.get("total")
    percent = (
        100.0
        if state == "SUCCESS"
        else (100.0 * done / total if total else None)
        if done is not None
        else None
    )
    return {
        "id": str(row.id),
        "kind": row.kind,
        "title": row.title,
        "requestedBy": row.requested_by.get_username() if row.requested_by else None,
        "params": row.params,
        "created": row.created.isoformat(),
        "finished": row.finished.isoformat() if row.finished else None,
        "state": state,
        "done": done,
        "total": total,
        "percent": percent,
        "note": info.get("note", ""),
        "result": info.get("result"),
        "error": info.get("error"),
    }
