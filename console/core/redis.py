"""The platform's Redis connections: the client this process's code uses (REDIS_URL), made on
first use, and the Channels layer the console's websockets wait on (``ChannelLayer``)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import Any

import redis
from channels_redis.core import RedisChannelLayer
from django.conf import settings

log = logging.getLogger(__name__)

_lock = threading.Lock()
_clients: dict[tuple[int, str], redis.Redis] = {}


def redis_client() -> redis.Redis:
    """A client of ``settings.REDIS_URL`` for this process (a forked child gets its own)."""
    key = (os.getpid(), settings.REDIS_URL)
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = redis.Redis.from_url(
                settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5, health_check_interval=30
            )
        return client


# What a Redis that is down, paused, restarting or overloaded answers with (a refused or
# reset connection, a read or connect timeout, "LOADING"...).
UNANSWERED: tuple[type[BaseException], ...] = (redis.RedisError, OSError)


class ChannelLayer(RedisChannelLayer):
    """channels-redis made quiet and patient for websockets.

    An idle socket is not an error.  The layer waits for a socket's messages with a blocking
    pop (BZPOPMIN) that Redis answers with nothing after ``brpop_timeout`` (5 s), and redis-py
    gives every read a 5 s socket timeout by default: each idle wait raced its own deadline
    and often lost ("Timeout reading from 127.0.0.1:6379", a traceback in the console's log
    and a closed socket).  Reads here wait ``READ_MARGIN_S`` longer than the pop.

    Redis slow or away is not a traceback either.  A socket's ``receive``, ``group_add`` and
    ``group_discard`` do not raise: the layer logs one warning when Redis stops answering
    and one line when it answers again, the sockets stay open (a receive waits and tries
    again), and the groups this process's sockets had joined are joined again (a restarted
    Redis has forgotten them).  Pushes (``send``, ``group_send``: Celery tasks) still raise,
    as their callers count on to say what was not delivered.
    """

    READ_MARGIN_S = 5.0
    CONNECT_TIMEOUT_S = 5.0
    RETRY_FIRST_S = 0.5
    RETRY_MAX_S = 10.0

    def __init__(self, hosts: Any = None, **kwargs: Any) -> None:
        super().__init__(hosts=hosts, **kwargs)
        for host in self.hosts:  # each a dict of connection-pool arguments by now
            host.setdefault("socket_timeout", self.brpop_timeout + self.READ_MARGIN_S)
            host.setdefault("socket_connect_timeout", self.CONNECT_TIMEOUT_S)
        self.joined: dict[str, set[str]] = {}  # channel -> groups, to join again after an outage
        self.down_since: float | None = None
        self.watcher: asyncio.Task[None] | None = None

    def where(self) -> str:
        """The Redis this layer uses, for a log line (no password)."""
        host = self.hosts[0]
        address = str(host.get("address", f"{host.get('host')}:{host.get('port')}"))
        return address.rsplit("@", 1)[-1]

    def lost(self, exc: BaseException) -> None:
        """Redis did not answer: say so once per outage, and watch for it to come back."""
        if self.down_since is None:
            self.down_since = time.monotonic()
            log.warning(
                "Redis at %s did not answer (%s: %s): live pushes to the console's pages wait "
                "until it does; their sockets stay open.",
                self.where(),
                type(exc).__name__,
                exc,
            )
        if self.watcher is None or self.watcher.done():
            self.watcher = asyncio.get_running_loop().create_task(self.watch())

    async def watch(self) -> None:
        """Ping Redis with a growing pause until it answers; then rejoin the groups and say so."""
        pause = self.RETRY_FIRST_S
        while self.down_since is not None:
            await asyncio.sleep(pause)
            pause = min(2 * pause, self.RETRY_MAX_S)
            try:
                for index in range(self.ring_size):
                    await self.connection(index).ping()
                for channel, groups in list(self.joined.items()):
                    for group in list(groups):
                        await super().group_add(group, channel)
            except UNANSWERED:
                continue
            log.info(
                "Redis at %s answers again after %.0f s: live pushes resume.",
                self.where(),
                time.monotonic() - self.down_since,
            )
            self.down_since = None

    async def receive(self, channel: str) -> dict[str, Any]:
        """The next message of ``channel``, however long Redis takes to come back."""
        pause = self.RETRY_FIRST_S
        while True:
            try:
                return await super().receive(channel)
            except UNANSWERED as exc:
                self.lost(exc)
                await asyncio.sleep(pause)
                pause = min(2 * pause, self.RETRY_MAX_S)

    async def group_add(self, group: str, channel: str) -> None:
        """Join ``group`` now, or as soon as Redis answers again."""
        self.joined.setdefault(channel, set()).add(group)
        try:
            await super().group_add(group, channel)
        except UNANSWERED as exc:
            self.lost(exc)

    async def group_discard(self, group: str, channel: str) -> None:
        """Leave ``group``; when Redis does not answer, the membership expires on its own."""
        groups = self.joined.get(channel, set())
        groups.discard(group)
        if not groups:
            self.joined.pop(channel, None)
        try:
            await super().group_discard(group, channel)
        except UNANSWERED as exc:
            self.lost(exc)


def as_text(value: bytes | str) -> str:
    """A Redis reply as text: the platform's clients answer bytes (no decode_responses), which
    redis-py's types cannot tell from str."""
    return value.decode() if isinstance(value, bytes) else value
