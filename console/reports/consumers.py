"""A run's live progress over a websocket: ``/ws/clusters/<cluster>/reports/<run id>/``.

The Celery task pushes each change to the run's Channels group (runner.push); the socket
forwards it, and also re-reads the run every few seconds, so a page still follows a run
when the pushes cannot reach it (a console without the shared Redis).  It sends the
current state first and closes once the run has finished.
"""

from __future__ import annotations

import asyncio
from typing import Any

from channels.db import database_sync_to_async

from console.core.sockets import ClusterSocket
from console.reports import runner, services
from console.reports.models import ReportRun

POLL_S = 3.0


class ReportProgress(ClusterSocket):
    """Signed-in users who may view the cluster; 4404 when the cluster has no such run."""

    async def start(self) -> bool:
        self.run_id = str(self.scope["url_route"]["kwargs"]["run_id"])
        self.group = runner.group_name(self.run_id)
        state = await self.current()
        if state is None:
            await self.close(code=4404)
            return False
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.last: dict[str, Any] = {}
        await self.forward(state)
        return True

    @database_sync_to_async
    def current(self) -> dict[str, Any] | None:
        run = services.run_of(self.cluster.name, self.run_id)
        return runner.state(run) if run is not None else None

    async def forward(self, state: dict[str, Any]) -> None:
        """Send ``state`` unless it is what was sent last; close after a final one."""
        state = {k: v for k, v in state.items() if k != "type"}
        if state != self.last:
            self.last = state
            await self.send_json(state)
        if state.get("status") in ReportRun.FINISHED:
            await self.close()

    async def report_update(self, event: dict[str, Any]) -> None:
        """A push from the task (runner.push)."""
        await self.forward(event)

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            state = await self.current()
            if state is not None:
                await self.forward(state)

    async def disconnect(self, code: int) -> None:
        await super().disconnect(code)
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)
