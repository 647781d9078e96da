"""The maintenance jobs as broker operations.

QUIVER_RUN_MAINTENANCE_JOB (90001) runs one job now and answers its record as JSON.  Its
ext fields: ``job`` (delay_scan, file_expiry or offset_persistence); ``driver``:
``platform`` when the platform's schedule sends it (Celery beat's passes: each renews the
job's lease, so the broker's own timer stands by), anything else or absent for an
operator's one-off run; ``leaseMillis`` (optional): how long the platform promises its
next pass within, when that is longer than the broker's configured lease.
QUIVER_GET_MAINTENANCE_STATUS (90002) answers who drives each job (platform, broker, or
broker on fallback), its lease and its last run, and the latest expiry runs that deleted
something (``deletions``, newest first).  RocketMQ's TRIGGER_DELETE_FILES (27)
runs file expiry as a manual deletion (expired files go whatever the hour).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from broker_core.broker.maintenance import BadLeaseError, JobRun, UnknownJobError
from broker_core.model.maintenance import FILE_EXPIRY, MANUAL, PLATFORM
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController


class MaintenanceProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def run_job(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        fields = request.ext_fields
        job = fields.get("job", "")
        runner = PLATFORM if fields.get("driver") == PLATFORM else MANUAL
        try:
            lease_ms = int(fields["leaseMillis"]) if fields.get("leaseMillis") else None
            run, _outcome = await self.broker.maintenance.run(job, runner=runner, lease_ms=lease_ms)
        except ValueError as exc:  # UnknownJobError, BadLeaseError, a leaseMillis not a number
            known = isinstance(exc, UnknownJobError | BadLeaseError)
            reason = str(exc) if known else f"bad leaseMillis: {exc}"
            return request.response(ResponseCode.SYSTEM_ERROR, reason)
        return _answer(request, run)

    def status(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """Who drives each job, its lease and its last run (MaintenanceService.status)."""
        return request.response(body=orjson.dumps(self.broker.maintenance.status()))

    async def delete_expired_commit_log(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG (329): RocketMQ 4.9's admin processor answers it by running
        the store's manual deletion of expired files, which is what TRIGGER_DELETE_FILES does
        here, so the two codes share one path (and one record in the job's history)."""
        return await self.trigger_delete_files(request, conn)

    async def trigger_delete_files(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        run, _outcome = await self.broker.maintenance.run(FILE_EXPIRY, manual=True, runner=MANUAL)
        return _answer(request, run)


def _answer(request: RemotingCommand, run: JobRun) -> RemotingCommand:
    """The run's record as JSON; a failed run is SYSTEM_ERROR with its reason as remark."""
    code = ResponseCode.SUCCESS if run.ok else ResponseCode.SYSTEM_ERROR
    return request.response(code, None if run.ok else run.result, body=orjson.dumps(run.to_json()))
