"""The broker's three maintenance jobs: run on request, or on the broker's own timers.

Every job is a broker operation: ``run(name)`` is what the protocol's
QUIVER_RUN_MAINTENANCE_JOB (and RocketMQ's TRIGGER_DELETE_FILES) call, and what Celery
drives in the platform.  With ``standaloneMaintenance = true`` a broker started on its own
also runs them on timers (``start``):

* delay scan: delivers due delayed messages (and retries), then sleeps until the next one
  falls due (at most 100 ms, RocketMQ's scan interval; at least 10 ms);
* file expiry: every 10 s (the store decides whether the hour or the disk calls for it);
* offset persistence: consumer offsets to disk every 5 s.

Each run is recorded (start, duration, outcome) so the broker can report when each last
ran.  The store's work runs in a worker thread, off the event loop, and one job never
runs twice at once (a timer and a request may meet).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from broker_core.store.cleanup import ExpiryReport
from broker_core.store.store import MessageStore

log = logging.getLogger(__name__)

DELAY_SCAN = "delay_scan"
FILE_EXPIRY = "file_expiry"
OFFSET_PERSISTENCE = "offset_persistence"
JOBS = (DELAY_SCAN, FILE_EXPIRY, OFFSET_PERSISTENCE)

DELAY_SCAN_MAX_SLEEP = 0.1
DELAY_SCAN_MIN_SLEEP = 0.01
EXPIRY_INTERVAL = 10.0
OFFSET_PERSIST_INTERVAL = 5.0


class UnknownJobError(ValueError):
    """A maintenance job name that is not one of ``JOBS``."""


@dataclass
class JobRun:
    """One run of a job: when it started (epoch ms), how long it took, what it did."""

    job: str
    started_ms: int
    duration_ms: float
    ok: bool
    result: str
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "startedMs": self.started_ms,
            "durationMs": round(self.duration_ms, 3),
            "ok": self.ok,
            "result": self.result,
            "details": self.details,
        }


def _describe(job: str, outcome: Any) -> tuple[str, dict[str, Any]]:
    """A one-line summary and the figures of a job's return value."""
    if job == DELAY_SCAN:
        delivered, next_due = outcome
        return f"delivered {delivered}", {"delivered": delivered, "nextDueMs": next_due}
    if isinstance(outcome, ExpiryReport):
        details = dataclasses.asdict(outcome)
        deleted = outcome.commit_log_files_deleted
        summary = (
            f"{'ran' if outcome.ran else 'skipped'} ({outcome.reason}); {deleted} commit-log file(s) deleted"
        )
        return summary, details
    return "ok", {}


class MaintenanceService:
    """Runs the three jobs on request, and on timers between ``start`` and ``stop``."""

    def __init__(self, store: MessageStore, clock_ms: Callable[[], int]) -> None:
        self.store = store
        self.clock_ms = clock_ms
        self.last_runs: dict[str, JobRun] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._locks = {name: asyncio.Lock() for name in JOBS}

    @property
    def timers_running(self) -> bool:
        return bool(self._tasks)

    def _job(self, name: str, manual: bool) -> Callable[[], Any]:
        if name == DELAY_SCAN:
            return self.store.deliver_due
        if name == FILE_EXPIRY:
            return partial(self.store.delete_expired_files, manual=manual)
        if name == OFFSET_PERSISTENCE:
            return self.store.persist_offsets
        raise UnknownJobError(f"no maintenance job {name!r}; the jobs are {', '.join(JOBS)}")

    async def run(self, name: str, *, manual: bool = False) -> tuple[JobRun, Any]:
        """Run job ``name`` now; return its record and its return value (None if it failed).

        ``manual`` (file expiry only) deletes expired files whatever the hour, as
        RocketMQ's TRIGGER_DELETE_FILES does.

        Raises:
            UnknownJobError: ``name`` is not a maintenance job.
        """
        job = self._job(name, manual)
        async with self._locks[name]:
            started = self.clock_ms()
            t0 = time.perf_counter()
            future = asyncio.get_running_loop().run_in_executor(None, job)
            try:
                outcome = await asyncio.shield(future)
            except asyncio.CancelledError:
                # A thread cannot be stopped: whoever cancelled us (stop, a closing server)
                # waits until it has finished, so the store is never closed under it.
                await asyncio.wait([future])
                raise
            except Exception as exc:
                log.exception("maintenance job %s failed", name)
                run = JobRun(name, started, (time.perf_counter() - t0) * 1000, False, f"failed: {exc}")
                self.last_runs[name] = run
                return run, None
            summary, details = _describe(name, outcome)
            run = JobRun(name, started, (time.perf_counter() - t0) * 1000, True, summary, details)
            self.last_runs[name] = run
            return run, outcome

    def start(self) -> None:
        """Run the jobs on the broker's own timers (``standaloneMaintenance``)."""
        self._tasks = [
            asyncio.create_task(self._delay_scan_loop(), name="delay-scan"),
            asyncio.create_task(self._every(EXPIRY_INTERVAL, FILE_EXPIRY), name="file-expiry"),
            asyncio.create_task(
                self._every(OFFSET_PERSIST_INTERVAL, OFFSET_PERSISTENCE), name="offset-persistence"
            ),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _delay_scan_loop(self) -> None:
        while True:
            _run, outcome = await self.run(DELAY_SCAN)
            sleep = DELAY_SCAN_MAX_SLEEP
            if outcome is not None:
                _delivered, next_due = outcome
                if next_due is not None:
                    sleep = (next_due - self.clock_ms()) / 1000
            await asyncio.sleep(min(DELAY_SCAN_MAX_SLEEP, max(DELAY_SCAN_MIN_SLEEP, sleep)))

    async def _every(self, interval: float, name: str) -> None:
        while True:
            await asyncio.sleep(interval)
            await self.run(name)

    def report(self) -> dict[str, dict[str, Any]]:
        """The last run of each job that ran, by job name."""
        return {name: run.to_json() for name, run in self.last_runs.items()}
