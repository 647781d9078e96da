"""The maintenance jobs as broker operations.

QUIVER_RUN_MAINTENANCE_JOB (90001, ext ``job``: delay_scan, file_expiry or
offset_persistence) runs one job now and answers its record as JSON; Celery beat drives
the jobs this way in the platform.  QUIVER_GET_MAINTENANCE_STATUS (90002) answers every
job's last run.  RocketMQ's TRIGGER_DELETE_FILES (27) runs file expiry as a manual
deletion (expired files go whatever the hour).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from broker_core.broker.maintenance import FILE_EXPIRY, JobRun, UnknownJobError
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController


class MaintenanceProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def run_job(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        job = request.ext_fields.get("job", "")
        try:
            run, _outcome = await self.broker.maintenance.run(job)
        except UnknownJobError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        return _answer(request, run)

    def status(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """Each job's last run by job name (a job that never ran is absent)."""
        return request.response(body=orjson.dumps(self.broker.maintenance.report()))

    async def trigger_delete_files(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        run, _outcome = await self.broker.maintenance.run(FILE_EXPIRY, manual=True)
        return _answer(request, run)


def _answer(request: RemotingCommand, run: JobRun) -> RemotingCommand:
    """The run's record as JSON; a failed run is SYSTEM_ERROR with its reason as remark."""
    code = ResponseCode.SUCCESS if run.ok else ResponseCode.SYSTEM_ERROR
    return request.response(code, None if run.ok else run.result, body=orjson.dumps(run.to_json()))
