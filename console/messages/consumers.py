"""Live tail of a topic over a websocket: new messages as they are stored.

``/ws/clusters/<cluster>/topics/<topic>/tail/`` starts at the end of every queue, says
``{"ready": true}`` once it has read those ends (everything stored after that is shown), and
once a second sends the messages stored since (at most 200 a second; beyond that it says how
many it skipped, never silently).  Reading uses tool pulls: no group's offsets move.
"""

from __future__ import annotations

import asyncio

from broker_core.client.admin import AdminClient
from broker_core.messagequeue import MessageQueue
from console.core.brokers import admin_call
from console.core.sockets import NO_CHANNEL_LAYER, ClusterSocket
from console.messages.services import MessageSummary, summary

INTERVAL_S = 1.0
MAX_PER_TICK = 200


async def ends(admin: AdminClient, topic: str) -> dict[MessageQueue, tuple[str, int]]:
    """Each queue of ``topic``: its broker address and its current end offset."""
    stats = await admin.topic_stats(topic)
    route = await admin.topic_route(topic)
    addrs = route.read_addrs()
    return {
        q.queue: (addrs[q.queue.broker_name], q.max_offset)
        for q in stats.queues
        if q.queue.broker_name in addrs
    }


async def read_new(
    admin: AdminClient, positions: dict[MessageQueue, tuple[str, int]]
) -> tuple[list[MessageSummary], int]:
    """Messages past ``positions`` (which advance), and how many were skipped over the cap."""
    now = await ends(admin, next(iter(positions)).topic) if positions else {}
    found: list[MessageSummary] = []
    skipped = 0
    for queue, (addr, end) in now.items():
        start = positions.get(queue, (addr, end))[1]
        if end <= start:
            continue
        room = MAX_PER_TICK - len(found)
        if end - start > room:
            skipped += end - start - max(room, 0)
        if room > 0:
            messages, _ = await admin.browse_queue(addr, queue, start, min(end, start + room), room)
            for msg in messages:
                row = summary(msg)
                row["brokerName"] = queue.broker_name
                found.append(row)
        positions[queue] = (addr, end)
    found.sort(key=lambda m: m["storeTimestamp"])
    return found, skipped


class TopicTail(ClusterSocket):
    """``/ws/clusters/<cluster>/topics/<topic>/tail/``: signed-in users who may view the cluster."""

    channel_layer_alias = NO_CHANNEL_LAYER  # reads the brokers only: Redis plays no part

    async def start(self) -> bool:
        self.topic = self.scope["url_route"]["kwargs"]["topic"]
        try:
            self.positions = await asyncio.to_thread(
                admin_call, self.cluster.namesrv_addr, lambda a: ends(a, self.topic)
            )
        except Exception as exc:
            await self.send_json({"error": str(exc)})
            await self.close(code=4404)
            return False
        await self.send_json({"ready": True})
        return True

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(INTERVAL_S)
            try:
                rows, skipped = await asyncio.to_thread(
                    admin_call, self.cluster.namesrv_addr, lambda a: read_new(a, self.positions)
                )
            except Exception as exc:  # said on the page; the next tick tries again
                await self.send_json({"error": str(exc)})
                continue
            if rows or skipped:
                await self.send_json({"messages": rows, "skipped": skipped})
