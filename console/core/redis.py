"""The platform's Redis connection (REDIS_URL): one client per process, made on first use."""

from __future__ import annotations

import os
import threading

import redis
from django.conf import settings

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
