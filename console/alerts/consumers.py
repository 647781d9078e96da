"""The alert feed every signed-in page listens to: ``/ws/alerts/``.

The check job sends each raise and resolve to the ``alerts`` Channels group
(console/alerts/notify.py); a socket passes on those of clusters its user may view.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.alerts.notify import CHANNEL_GROUP
from console.core.access import allowed


class AlertFeed(AsyncJsonWebsocketConsumer):
    """Closes with 4403 for anonymous users; otherwise sends ``{"event", "text", "alert"}``."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4403)
            return
        self.may_view: dict[str, bool] = {}
        # Open first: joining waits on Redis, and the page need not (the layer joins as soon
        # as Redis answers, console/core/redis.py).
        await self.accept()
        await self.channel_layer.group_add(CHANNEL_GROUP, self.channel_name)

    async def alert_event(self, message: dict[str, Any]) -> None:
        body = message["body"]
        cluster = body["alert"]["cluster"]
        if cluster not in self.may_view:  # asked once per socket and cluster
            user = self.scope["user"]
            self.may_view[cluster] = await database_sync_to_async(allowed)(user, cluster, "view")
        if self.may_view[cluster]:
            await self.send_json(body)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "may_view"):
            await self.channel_layer.group_discard(CHANNEL_GROUP, self.channel_name)
