"""The maintenance jobs the platform runs, how often, and when one counts as overdue."""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.model.maintenance import DELAY_SCAN, FILE_EXPIRY, OFFSET_PERSISTENCE
from console.quiver import platform_settings

HISTORY_RETENTION = "history_retention"
# The platform's own job runs under this name where a broker's address would be.
PLATFORM = "platform"


@dataclass(frozen=True)
class JobSpec:
    """One job: its name, its beat period, and how long a run may hold the overlap lock.

    ``lock_seconds`` bounds how long a crashed run can block the next ones: the lock
    expires by itself.
    """

    name: str
    title: str
    every_seconds: float
    lock_seconds: int
    per_broker: bool = True

    @property
    def overdue_after_seconds(self) -> float:
        """No run for this long means the schedule is not being kept (three periods missed)."""
        return 3 * self.every_seconds + 2


def job_specs() -> dict[str, JobSpec]:
    """Every job by name, with the periods configured in ``settings.QUIVER``."""
    quiver = platform_settings()
    specs = [
        # Beat's period; each broker's scan reschedules itself far more often than this.
        JobSpec(DELAY_SCAN, "Delay-queue scan", 1.0, 30),
        JobSpec(OFFSET_PERSISTENCE, "Offset persistence and history", quiver["OFFSET_PERSIST_SECONDS"], 60),
        JobSpec(FILE_EXPIRY, "File expiry", quiver["EXPIRY_CHECK_SECONDS"], 900),
        JobSpec(HISTORY_RETENTION, "History retention", 3600.0, 600, per_broker=False),
    ]
    return {spec.name: spec for spec in specs}
