"""The live figures of a cluster over a websocket: every two seconds, the brokers' TPS in and
out and today's totals, summed over the brokers that answered (the others are named)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.core.access import allowed
from console.core.brokers import admin_call
from nameserver import services
from nameserver.clusters import find_cluster

INTERVAL_S = 2.0


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Cluster figures from broker rows; a figure is None when no broker could be read."""
    readable = [r for r in rows if not r["error"]]

    def total(key: str) -> float | None:
        values = [r[key] for r in readable if r[key] is not None]
        return round(sum(values), 2) if values else None

    return {
        "putTps": total("putTps"),
        "getTps": total("getTps"),
        "putToday": total("putToday"),
        "getToday": total("getToday"),
        "brokers": len(rows),
        "unreadable": [r["addr"] for r in rows if r["error"]],
    }


class ClusterLive(AsyncJsonWebsocketConsumer):
    """``/ws/clusters/<cluster>/live/``: signed-in users who may view the cluster."""

    async def connect(self) -> None:
        name = self.scope["url_route"]["kwargs"]["cluster"]
        user = self.scope.get("user")
        if user is None or not await database_sync_to_async(allowed)(user, name, "view"):
            await self.close(code=4403)
            return
        try:
            self.cluster = await database_sync_to_async(find_cluster)(name)
        except LookupError:
            await self.close(code=4404)
            return
        await self.accept()
        self.ticker = asyncio.create_task(self.tick())

    async def disconnect(self, code: int) -> None:
        ticker = getattr(self, "ticker", None)
        if ticker is not None:
            ticker.cancel()

    async def tick(self) -> None:
        while True:
            try:
                rows = await asyncio.to_thread(admin_call, self.cluster.namesrv_addr, services.broker_rows)
                await self.send_json({"at": int(time.time() * 1000), **totals(rows)})
            except Exception as exc:  # the page shows why the numbers stopped
                await self.send_json(
                    {"at": int(time.time() * 1000), "error": str(exc), "putTps": None, "getTps": None}
                )
            await asyncio.sleep(INTERVAL_S)
