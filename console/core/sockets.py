"""The base of the console's websockets: a signed-in user who may view the cluster of the
URL, and one ticker task per connection that pushes until the socket closes."""

from __future__ import annotations

import asyncio

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.core.access import allowed
from nameserver.clusters import ClusterRef, find_cluster


class ClusterSocket(AsyncJsonWebsocketConsumer):
    """Closes with 4403 (no access) or 4404 (no such cluster); otherwise ``start`` then ``tick``."""

    cluster: ClusterRef

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
        if await self.start():
            self.ticker = asyncio.create_task(self.tick())

    async def start(self) -> bool:
        """Prepare before the first tick; False closes the socket (after saying why)."""
        return True

    async def tick(self) -> None:
        raise NotImplementedError

    async def disconnect(self, code: int) -> None:
        ticker = getattr(self, "ticker", None)
        if ticker is not None:
            ticker.cancel()
