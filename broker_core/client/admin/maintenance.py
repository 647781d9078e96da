"""The admin client's broker calls: runtime figures, settings, maintenance jobs and status.

The platform (Celery) drives a broker's maintenance jobs through ``run_maintenance``; the
broker's own timer stands by while the platform's lease holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from broker_core.client.admin.base import AdminRequests
from broker_core.client.adminmodels import (
    MaintenanceRun,
    MaintenanceStatus,
    OffsetSnapshot,
    parse_properties_text,
)
from broker_core.errors import AdminError
from broker_core.model.hastatus import BrokerHAStatus
from broker_core.model.maintenance import JOBS, PLATFORM
from broker_core.remoting.codes import RequestCode

__all__ = ["MAINTENANCE_JOBS", "BrokerCalls"]

MAINTENANCE_JOBS: Final = JOBS
"""The broker maintenance jobs QUIVER_RUN_MAINTENANCE_JOB can run (``model.maintenance.JOBS``)."""


class BrokerCalls(AdminRequests):
    """One broker's runtime info and settings, its maintenance jobs and schedule status."""

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """The broker's runtime figures (GET_BROKER_RUNTIME_INFO), all values as strings."""
        response = await self._invoke(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        table = self._json(response, "runtime info").get("table") or {}
        return {str(k): str(v) for k, v in sorted(table.items())}

    async def broker_config(self, broker_addr: str) -> dict[str, str]:
        """The broker's running settings by RocketMQ key name (GET_BROKER_CONFIG)."""
        response = await self._invoke(broker_addr, RequestCode.GET_BROKER_CONFIG)
        return dict(sorted(parse_properties_text(response.body.decode("utf-8", errors="replace")).items()))

    async def update_broker_config(self, broker_addr: str, changes: Mapping[str, str]) -> dict[str, str]:
        """Change settings of the running broker (UPDATE_BROKER_CONFIG; all or nothing, until
        it restarts) and return its settings as they now are."""
        if not changes:
            raise AdminError("no setting to change")
        text = "".join(f"{key}={value}\n" for key, value in changes.items())
        await self._invoke(broker_addr, RequestCode.UPDATE_BROKER_CONFIG, body=text.encode("utf-8"))
        return await self.broker_config(broker_addr)

    async def ha_status(self, broker_addr: str) -> BrokerHAStatus:
        """The broker's replication (GET_BROKER_HA_STATUS): a master's slaves and how far
        behind each is, or a slave's link to its master."""
        response = await self._invoke(broker_addr, RequestCode.GET_BROKER_HA_STATUS)
        try:
            return BrokerHAStatus.from_json(self._json(response, "replication status"))
        except (KeyError, ValueError, TypeError) as exc:
            raise AdminError(
                f"{broker_addr} answered GET_BROKER_HA_STATUS with a malformed body: {exc!r}"
            ) from None

    async def run_maintenance(
        self, broker_addr: str, job: str, *, scheduled: bool = False, lease_ms: int | None = None
    ) -> MaintenanceRun:
        """Run one maintenance job on the broker now and return how it went.

        ``scheduled``: this is the platform's schedule driving the job, so the broker's own
        timer stands by for the job's lease (at least ``lease_ms`` when given); an
        operator's one-off run leaves the broker's timers as they are.
        """
        if job not in MAINTENANCE_JOBS:
            raise AdminError(f"unknown maintenance job {job!r} (one of {', '.join(MAINTENANCE_JOBS)})")
        fields = {"job": job}
        if scheduled:
            fields["driver"] = PLATFORM
            if lease_ms is not None:
                fields["leaseMillis"] = str(lease_ms)
        response = await self._invoke(broker_addr, RequestCode.QUIVER_RUN_MAINTENANCE_JOB, fields)
        return MaintenanceRun.from_json(job, self._json(response, "maintenance run"))

    async def maintenance_status(self, broker_addr: str) -> MaintenanceStatus:
        """Who drives each maintenance job on the broker (platform, or the broker on
        fallback), its lease, and its last run."""
        response = await self._invoke(broker_addr, RequestCode.QUIVER_GET_MAINTENANCE_STATUS)
        return MaintenanceStatus.from_json(self._json(response, "maintenance status"))

    async def offset_snapshot(self, broker_addr: str) -> OffsetSnapshot:
        """Every committed offset on the broker beside its queue's offsets, and the put/get
        totals, in one call (what the platform's offset history records)."""
        response = await self._invoke(broker_addr, RequestCode.QUIVER_GET_OFFSET_SNAPSHOT)
        return OffsetSnapshot.from_json(self._json(response, "offset snapshot"))

    async def schedule_status(self, broker_addr: str) -> dict[str, Any]:
        """Delayed messages waiting per level (next due time) and pending half messages (age)."""
        response = await self._invoke(broker_addr, RequestCode.QUIVER_GET_SCHEDULE_STATUS)
        return dict(self._json(response, "schedule status"))
