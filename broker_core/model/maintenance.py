"""The broker's maintenance jobs and who runs them: the names both sides of the protocol use.

QUIVER_RUN_MAINTENANCE_JOB names a job (``job``) and, when the platform's schedule sends
it, its driver (``driver=platform``); the broker records each run with its runner.  What
the jobs do and how leases work is ``broker_core.broker.maintenance``.
"""

from __future__ import annotations

from typing import Final

DELAY_SCAN: Final = "delay_scan"
FILE_EXPIRY: Final = "file_expiry"
OFFSET_PERSISTENCE: Final = "offset_persistence"
JOBS: Final = (DELAY_SCAN, FILE_EXPIRY, OFFSET_PERSISTENCE)

# Who ran a job.
PLATFORM: Final = "platform"
BROKER: Final = "broker"
MANUAL: Final = "manual"
RUNNERS: Final = (PLATFORM, BROKER, MANUAL)
