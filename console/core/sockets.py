"""The base of the console's websockets: a signed-in user who may view the cluster of the
URL, and one ticker task per connection that pushes until the socket closes."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.core.access import allowed
from nameserver.clusters import ClusterRef, find_cluster

log = logging.getLogger(__name__)

# The channel-layer alias of a socket that joins no group and only pushes what it reads
# itself: no layer is configured under it, so Channels gives the socket none, and it never
# waits on Redis (nor fails with it).
NO_CHANNEL_LAYER = "none: this socket joins no group"

# Close code of a socket whose pushes stopped on an error (the page reconnects).
CLOSE_TRY_AGAIN = 1011


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
            self.ticker = asyncio.create_task(self.ticking())

    async def start(self) -> bool:
        """Prepare before the first tick; False closes the socket (after saying why)."""
        return True

    async def tick(self) -> None:
        raise NotImplementedError

    async def ticking(self) -> None:
        """Run ``tick``; an error it lets out is one log line and a close the page reconnects
        after, not a task traceback."""
        try:
            await self.tick()
        except Exception as exc:  # noqa: BLE001 - anything: the socket closes cleanly
            log.warning(
                "%s stopped pushing (%s: %s); closing it", self.scope.get("path"), type(exc).__name__, exc
            )
            with contextlib.suppress(Exception):
                await self.close(code=CLOSE_TRY_AGAIN)

    async def disconnect(self, code: int) -> None:
        ticker = getattr(self, "ticker", None)
        if ticker is not None:
            ticker.cancel()
