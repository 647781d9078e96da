"""The broker's maintenance jobs on its own timers (``standaloneMaintenance = true``).

In the platform, Celery drives these jobs; a broker started on its own runs them here:

* delay scan: delivers due delayed messages (and retries), then sleeps until the next one
  falls due (at most 100 ms, RocketMQ's scan interval; at least 10 ms);
* file expiry: every 10 s (the store decides whether the hour or the disk calls for it);
* offset persistence: consumer offsets to disk every 5 s.

Each run is recorded (start, duration, result) so the broker can report when each last
ran.  The store's work runs in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from broker_core.store.store import MessageStore

log = logging.getLogger(__name__)

DELAY_SCAN_MAX_SLEEP = 0.1
DELAY_SCAN_MIN_SLEEP = 0.01
EXPIRY_INTERVAL = 10.0
OFFSET_PERSIST_INTERVAL = 5.0


@dataclass
class JobRun:
    started_ms: int
    duration_ms: float
    result: str


class MaintenanceService:
    """Runs the three jobs on timers until stopped."""

    def __init__(self, store: MessageStore, clock_ms: Callable[[], int]) -> None:
        self.store = store
        self.clock_ms = clock_ms
        self.last_runs: dict[str, JobRun] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._delay_scan_loop(), name="delay-scan"),
            asyncio.create_task(
                self._every(EXPIRY_INTERVAL, "file_expiry", self._expire), name="file-expiry"
            ),
            asyncio.create_task(
                self._every(OFFSET_PERSIST_INTERVAL, "offset_persistence", self._persist),
                name="offset-persistence",
            ),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _run(self, name: str, job: Callable[[], Any]) -> Any:
        started = self.clock_ms()
        t0 = time.perf_counter()
        try:
            result = await asyncio.get_running_loop().run_in_executor(None, job)
        except Exception as exc:
            log.exception("maintenance job %s failed", name)
            self.last_runs[name] = JobRun(started, (time.perf_counter() - t0) * 1000, f"failed: {exc}")
            return None
        self.last_runs[name] = JobRun(started, (time.perf_counter() - t0) * 1000, "ok")
        return result

    async def _delay_scan_loop(self) -> None:
        while True:
            outcome = await self._run("delay_scan", self.store.deliver_due)
            sleep = DELAY_SCAN_MAX_SLEEP
            if outcome is not None:
                _delivered, next_due = outcome
                if next_due is not None:
                    sleep = (next_due - self.clock_ms()) / 1000
            await asyncio.sleep(min(DELAY_SCAN_MAX_SLEEP, max(DELAY_SCAN_MIN_SLEEP, sleep)))

    async def _every(self, interval: float, name: str, job: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval)
            await self._run(name, job)

    def _expire(self) -> Any:
        return self.store.delete_expired_files()

    def _persist(self) -> None:
        self.store.persist_offsets()

    def report(self) -> dict[str, dict[str, Any]]:
        return {name: asdict(run) for name, run in self.last_runs.items()}
