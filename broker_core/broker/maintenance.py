"""The broker's three maintenance jobs, and who runs them: the platform, or the broker itself.

Every job is a broker operation: ``run(name)`` is what the protocol's
QUIVER_RUN_MAINTENANCE_JOB (and RocketMQ's TRIGGER_DELETE_FILES / DELETE_EXPIRED_COMMITLOG)
call, and what Celery drives in the platform.

* delay scan: delivers due delayed messages (and retries) and timer messages, then sleeps
  until the next one falls due (at most 100 ms, RocketMQ's scan interval; at least 10 ms);
* file expiry: every 10 s (the store decides whether the hour or the disk calls for it);
  a run that deletes anything is logged at WARNING by the store, saying what went and
  which groups had not consumed it, and is kept (the last ``DELETIONS_KEPT``) in the
  status, so the console shows it and alerts on it whoever ran it;
* offset persistence: consumer offsets to disk every 5 s.

The broker never depends on the platform for correctness.  ``standaloneMaintenance``
says who drives the jobs:

* ``auto`` (the default): each pass the platform sends renews that job's *lease* (one
  second for the delay scan, longer for the others; the platform may ask for up to ten
  times more).  While a lease holds, the broker's own timer for the job stands by; once it
  runs out (the platform stopped, its worker is busy or paused, or there is no platform at
  all) the broker runs the job on its own timer — *fallback* — until the platform's passes
  come back.  A broker started alone from the CLI so delivers delayed messages and
  retries.  A platform that is merely slow cannot make a message late either: while the
  delay scan's lease holds, the broker still looks every 100 ms, and a message left more
  than ``delayScanOverdueMillis`` (200 ms) past its time is delivered by the broker at
  once (a *rescue*).
* ``true``: the broker's timers always run the jobs (requests are served as well).
* ``false``: only requests run them; the broker warns at start.

One job never runs twice at once, whoever drives it (a lock per job).  Each run is
recorded with who ran it (``platform``, ``broker`` or ``manual``: an operator's request
that is not the platform's schedule and renews no lease), so the broker can report when
each job last ran and whether it is on fallback.  The store's work runs in a worker
thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from broker_core.config import BrokerConfig
from broker_core.model.maintenance import (
    BROKER,
    DELAY_SCAN,
    FILE_EXPIRY,
    JOBS,
    OFFSET_PERSISTENCE,
    PLATFORM,
)
from broker_core.store.cleanup import ExpiryReport
from broker_core.store.store import MessageStore

log = logging.getLogger(__name__)


# standaloneMaintenance values.
AUTO = "auto"
ALWAYS = "true"
NEVER = "false"

DELAY_SCAN_MAX_SLEEP = 0.1
DELAY_SCAN_MIN_SLEEP = 0.01
EXPIRY_INTERVAL = 10.0
OFFSET_PERSIST_INTERVAL = 5.0
# A lease longer than this is refused (a typo must not silence the broker's timers for days)...
MAX_LEASE_MS = 24 * 3_600_000
# ... and the platform is trusted for at most this many times the broker's own lease.
MAX_LEASE_FACTOR = 10
DEFAULT_OVERDUE_MS = 200
RESCUE_LOG_EVERY_MS = 10_000  # a slow platform is said once per episode, not per rescue
DELETIONS_KEPT = 20  # expiry runs that deleted something, kept for the status


class UnknownJobError(ValueError):
    """A maintenance job name that is not one of ``JOBS``."""


class BadLeaseError(ValueError):
    """A lease a request asked for that is not a positive number of ms up to a day."""


@dataclass
class JobRun:
    """One run of a job: when it started (epoch ms), how long it took, what it did, who ran it."""

    job: str
    started_ms: int
    duration_ms: float
    ok: bool
    result: str
    details: dict[str, Any] = dataclasses.field(default_factory=dict)
    runner: str = PLATFORM

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "startedMs": self.started_ms,
            "durationMs": round(self.duration_ms, 3),
            "ok": self.ok,
            "result": self.result,
            "details": self.details,
            "runner": self.runner,
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
        if outcome.messages_deleted:
            summary += (
                f", {outcome.messages_deleted_total} message(s) of {len(outcome.messages_deleted)} topic(s)"
            )
        if outcome.unconsumed:
            groups = sorted({u.group for u in outcome.unconsumed})
            summary += f"; {outcome.unconsumed_total} NOT YET CONSUMED by {', '.join(groups)}"
        return summary, details
    return "ok", {}


def default_leases_ms(config: BrokerConfig) -> dict[str, int]:
    """Each job's lease (ms) as broker.conf sets it: the least the platform's pass buys."""
    return {
        DELAY_SCAN: config.delay_scan_lease_millis,
        OFFSET_PERSISTENCE: config.offset_persistence_lease_millis,
        FILE_EXPIRY: config.file_expiry_lease_millis,
    }


@dataclass
class _Lease:
    """The platform's hold on one job: until when (monotonic seconds), and its last pass;
    how often the broker rescued a message the platform left overdue, and when last."""

    until: float = 0.0
    last_platform_ms: int | None = None
    lease_ms: int = 0
    rescues: int = 0
    last_rescue_ms: int | None = None


class MaintenanceService:
    """Runs the three jobs on request, and on the broker's own timers between ``start`` and
    ``stop`` whenever ``mode`` says the broker should (see the module's docstring)."""

    def __init__(
        self,
        store: MessageStore,
        clock_ms: Callable[[], int],
        *,
        mode: str = AUTO,
        leases_ms: dict[str, int] | None = None,
        overdue_ms: int = DEFAULT_OVERDUE_MS,
    ) -> None:
        self.store = store
        self.clock_ms = clock_ms
        self.mode = mode
        self.leases_ms = leases_ms if leases_ms is not None else default_leases_ms(BrokerConfig())
        self.overdue_ms = overdue_ms
        self.last_runs: dict[str, JobRun] = {}
        # The latest expiry runs that deleted something (newest last), whoever drove them:
        # the next run, which deletes nothing, must not hide them from the status.
        self.deletions: collections.deque[JobRun] = collections.deque(maxlen=DELETIONS_KEPT)
        self._leases = {name: _Lease() for name in JOBS}
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

    # -- leases ----------------------------------------------------------------------------

    def _renew(self, name: str, lease_ms: int | None) -> None:
        """A platform pass of ``name`` arrived (or ended): the broker's timer stands by."""
        lease = self._leases[name]
        floor = self.leases_ms[name]
        lease.lease_ms = min(max(floor, lease_ms or 0), MAX_LEASE_FACTOR * floor)
        lease.until = max(lease.until, time.monotonic() + lease.lease_ms / 1000)
        lease.last_platform_ms = self.clock_ms()

    def lease_left(self, name: str) -> float:
        """Seconds the platform's lease on ``name`` still holds (0 when it has run out)."""
        return max(0.0, self._leases[name].until - time.monotonic())

    def driver(self, name: str) -> str:
        """Who drives ``name`` now: the platform (a lease holds), the broker (its timers run
        the job: ``true``, or ``auto`` with the lease run out), or ``none`` (``false`` and
        no platform pass lately: nothing runs it)."""
        if self.mode == ALWAYS:
            return BROKER
        if self.lease_left(name) > 0:
            return PLATFORM
        return BROKER if self.mode == AUTO else "none"

    def on_fallback(self, name: str) -> bool:
        """True when the broker runs ``name`` only because the platform's passes stopped
        coming (or never came): ``auto`` with the lease run out."""
        return self.mode == AUTO and self.lease_left(name) <= 0

    # -- running ---------------------------------------------------------------------------

    async def run(
        self, name: str, *, manual: bool = False, runner: str = PLATFORM, lease_ms: int | None = None
    ) -> tuple[JobRun, Any]:
        """Run job ``name`` now; return its record and its return value (None if it failed).

        ``manual`` (file expiry only) deletes expired files whatever the hour, as
        RocketMQ's TRIGGER_DELETE_FILES does.  ``runner`` says who asks: a ``platform`` pass
        renews the job's lease (for at least ``lease_ms`` when given), so the broker's own
        timer stands by.

        Raises:
            UnknownJobError: ``name`` is not a maintenance job.
            BadLeaseError: ``lease_ms`` is not positive or longer than a day.
        """
        job = self._job(name, manual)
        if lease_ms is not None and not 0 < lease_ms <= MAX_LEASE_MS:
            raise BadLeaseError(f"leaseMillis must be 1..{MAX_LEASE_MS} ms, not {lease_ms}")
        if runner == PLATFORM:
            previous = self.last_runs.get(name)
            if previous is not None and previous.runner == BROKER and self.mode == AUTO:
                log.info("the platform drives %s again: the broker's timer stands by", name)
            self._renew(name, lease_ms)
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
                duration = (time.perf_counter() - t0) * 1000
                run = JobRun(name, started, duration, False, f"failed: {exc}", runner=runner)
                outcome = None
            else:
                summary, details = _describe(name, outcome)
                duration = (time.perf_counter() - t0) * 1000
                # Offset persistence answers False when the disk refused the file (kept as it was).
                ok = not (name == OFFSET_PERSISTENCE and outcome is False)
                if not ok:
                    summary = (
                        "failed: consumerOffset.json could not be written (disk full?); the old file is kept"
                    )
                run = JobRun(name, started, duration, ok, summary, details, runner)
        if runner == PLATFORM:
            self._renew(name, lease_ms)  # a long pass must not let the lease run out under it
        self.last_runs[name] = run
        if isinstance(outcome, ExpiryReport) and outcome.deleted_anything:
            self.deletions.append(run)
        return run, outcome

    def start(self) -> None:
        """Start the broker's own timers (``auto``: they stand by while the platform drives)."""
        if self.mode == NEVER:
            log.warning(
                "standaloneMaintenance = false: this broker runs no delay scan, offset persistence "
                "or file expiry of its own; delayed messages and retries wait for the platform"
            )
            return
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

    async def _stand_by(self, name: str) -> bool:
        """While the platform's lease on ``name`` holds, sleep until it would run out (the
        delay scan: at most 100 ms, then look for an overdue message) and return True (look
        again); False when the broker's timer should run the job now."""
        if self.mode != AUTO:
            return False
        left = self.lease_left(name)
        if left <= 0:
            return False
        if name != DELAY_SCAN:
            await asyncio.sleep(left + 0.001)
            return True
        await asyncio.sleep(min(left + 0.001, DELAY_SCAN_MAX_SLEEP))
        return not self._overdue()

    def _overdue(self) -> bool:
        """Whether a delayed message waits more than ``overdue_ms`` past its time while no
        scan is running: the platform drives, but too slowly (its worker is starved or
        busy), so the broker delivers it itself."""
        if self._locks[DELAY_SCAN].locked():
            return False  # a scan is at it now
        store = self.store
        dues = [
            due
            for due in (store.schedule.earliest_due_ms(), store.timers.earliest_due_ms())
            if due is not None
        ]
        due = min(dues) if dues else None
        if due is None or self.clock_ms() - due <= self.overdue_ms:
            return False
        lease = self._leases[DELAY_SCAN]
        if lease.last_rescue_ms is None or self.clock_ms() - lease.last_rescue_ms > RESCUE_LOG_EVERY_MS:
            log.warning(
                "a delayed message is %d ms past its time and the platform's scans have not moved it: "
                "the broker delivers it itself",
                self.clock_ms() - due,
            )
        lease.rescues += 1
        lease.last_rescue_ms = self.clock_ms()
        return True

    async def _run_own(self, name: str) -> tuple[JobRun, Any]:
        """Run ``name`` on the broker's timer, saying so once when it takes over from the platform."""
        previous = self.last_runs.get(name)
        lapsed = self.lease_left(name) <= 0  # else a rescue (_overdue says so itself)
        if self.mode == AUTO and lapsed and previous is not None and previous.runner == PLATFORM:
            log.warning(
                "no platform pass of %s for %.1f s: the broker runs it on its own timer until they come back",
                name,
                self._leases[name].lease_ms / 1000,
            )
        return await self.run(name, runner=BROKER)

    async def _delay_scan_loop(self) -> None:
        while True:
            if await self._stand_by(DELAY_SCAN):
                continue
            _run, outcome = await self._run_own(DELAY_SCAN)
            sleep = DELAY_SCAN_MAX_SLEEP
            if outcome is not None:
                _delivered, next_due = outcome
                if next_due is not None:
                    sleep = (next_due - self.clock_ms()) / 1000
            await asyncio.sleep(min(DELAY_SCAN_MAX_SLEEP, max(DELAY_SCAN_MIN_SLEEP, sleep)))

    async def _every(self, interval: float, name: str) -> None:
        while True:
            await asyncio.sleep(interval)
            while await self._stand_by(name):
                pass
            await self._run_own(name)

    # -- reporting -------------------------------------------------------------------------

    def report(self) -> dict[str, dict[str, Any]]:
        """The last run of each job that ran, by job name."""
        return {name: run.to_json() for name, run in self.last_runs.items()}

    def status(self) -> dict[str, Any]:
        """Who drives each job, its lease, the platform's last pass and the job's last run,
        and the latest expiry runs that deleted something (newest first): what
        QUIVER_GET_MAINTENANCE_STATUS answers."""
        jobs = {}
        for name in JOBS:
            lease = self._leases[name]
            last = self.last_runs.get(name)
            jobs[name] = {
                "driver": self.driver(name),
                "fallback": self.on_fallback(name),
                "leaseMs": max(self.leases_ms[name], lease.lease_ms),
                "leaseLeftMs": round(self.lease_left(name) * 1000),
                "lastPlatformMs": lease.last_platform_ms,
                "rescues": lease.rescues,
                "lastRescueMs": lease.last_rescue_ms,
                "lastRun": last.to_json() if last is not None else None,
            }
        deletions = [run.to_json() for run in reversed(self.deletions)]
        return {"mode": self.mode, "jobs": jobs, "deletions": deletions, "store": self.store_health()}

    def store_health(self) -> dict[str, Any]:
        """What the operator must know about the store's files: the damaged commit-log ranges
        on record (damaged.json) and the read-only state of a full disk (None: writable)."""
        store = self.store
        return {
            "damagedRanges": [
                {"start": r.start, "end": r.end, "size": r.size, "reason": r.reason, "foundMs": r.found_ms}
                for r in store.damage.ranges
            ],
            "diskFull": store.disk_full_reason,
        }
