"""The live figures of a cluster over a websocket: every two seconds, the brokers' TPS in and
out and today's totals, summed over the brokers that answered (the others are named)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from console.core.brokers import admin_call
from console.core.sockets import ClusterSocket
from nameserver import services

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


class ClusterLive(ClusterSocket):
    """``/ws/clusters/<cluster>/live/``: signed-in users who may view the cluster."""

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
