"""The console's websockets against a real, private Redis that idles, pauses and comes back.

The alert feed waits on the Channels layer (Redis); the dashboard's live figures read the
brokers only.  Neither may log a traceback or an error when Redis idles or stops answering
(the issue saw 24 ``Timeout reading from 127.0.0.1:6379`` tracebacks): an idle socket is
quiet, a paused Redis is one warning, the sockets stay open and pushes resume after it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model

from console.alerts.notify import CHANNEL_GROUP
from console.core.models import ClusterAccess
from console.core.redis import ChannelLayer
from console.routing import websocket_urlpatterns
from tests.servers import free_port, redis_binary, wait_for

from .conftest import Servers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# Longer than a read of the layer may wait (its blocking pop plus the margin).
BEYOND_READ_TIMEOUT_S = ChannelLayer.brpop_timeout + ChannelLayer.READ_MARGIN_S + 3


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of this test alone (it gets paused), on a free port."""
    port = free_port()
    argv = [redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(
        [*argv, "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url, socket_timeout=1)

    def answers() -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False

    try:
        wait_for(answers, 20, "the test's redis-server")
        yield url, proc
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def layer_on_redis(own_redis: tuple[str, subprocess.Popen[bytes]], settings: Any) -> subprocess.Popen[bytes]:
    """This process's Channels layer as ``up`` configures it (console/settings.py), on ``own_redis``."""
    url, proc = own_redis
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "console.core.redis.ChannelLayer", "CONFIG": {"hosts": [url]}}
    }
    return proc


@pytest.fixture
def viewer(db: None) -> Any:
    user = get_user_model().objects.create_user("live-watcher", password="pw-watch-123")
    ClusterAccess.objects.create(user=user, cluster="*", role="viewer")
    return user


async def open_socket(path: str, user: Any) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    socket.scope["user"] = user
    connected, _ = await socket.connect(timeout=5)
    assert connected, f"{path} did not open"
    return socket


def alert(n: int) -> dict[str, Any]:
    """What the check job pushes to the alert group (console/alerts/notify.py), trimmed."""
    body = {"event": "raised", "text": f"[ALERT] test {n}", "alert": {"id": n, "cluster": "default"}}
    return {"type": "alert.event", "body": body}


def loud(records: list[logging.LogRecord]) -> list[str]:
    """Records a person reading the console's log would take for a failure."""
    return [f"{r.name}: {r.getMessage()}" for r in records if r.levelno >= logging.ERROR or r.exc_info]


async def close(*sockets: WebsocketCommunicator) -> None:
    for socket in sockets:
        await socket.disconnect()
    layer = get_channel_layer()
    if layer is not None and hasattr(layer, "close_pools"):
        await layer.close_pools()


async def test_an_idle_socket_is_quiet_past_the_read_timeout(
    layer_on_redis: subprocess.Popen[bytes], viewer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    socket = await open_socket("/ws/alerts/", viewer)
    await asyncio.sleep(BEYOND_READ_TIMEOUT_S)  # nothing to send: the layer's reads come back empty
    assert await socket.receive_nothing(timeout=0.5)
    assert loud(caplog.records) == [] and [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    await get_channel_layer().group_send(CHANNEL_GROUP, alert(1))
    got = await socket.receive_json_from(timeout=10)
    assert got["text"] == "[ALERT] test 1"
    await close(socket)


async def test_a_paused_redis_is_one_warning_and_pushes_resume(
    layer_on_redis: subprocess.Popen[bytes],
    on_servers: Servers,
    viewer: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    alerts = await open_socket("/ws/alerts/", viewer)
    live = await open_socket("/ws/clusters/default/live/", viewer)
    await live.receive_json_from(timeout=15)

    os.kill(layer_on_redis.pid, signal.SIGSTOP)  # Redis holds every connection, answers nothing
    try:
        # A page opened meanwhile gets its socket at once (it joins the group later).
        late = await open_socket("/ws/alerts/", viewer)
        # The dashboard's figures come from the brokers and keep coming.
        samples = 0
        loop = asyncio.get_running_loop()
        until = loop.time() + BEYOND_READ_TIMEOUT_S
        while loop.time() < until:
            got = await live.receive_json_from(timeout=15)
            assert "error" not in got and got["rows"][0]["cells"]["putToday"]
            samples += 1
    finally:
        os.kill(layer_on_redis.pid, signal.SIGCONT)
    assert samples >= 3

    def said(text: str) -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == "console.core.redis" and text in r.getMessage()]

    for _ in range(60):  # the layer pings with a growing pause (at most 10 s)
        if said("answers again"):
            break
        await asyncio.sleep(0.5)
    assert len(said("did not answer")) == 1, [r.getMessage() for r in caplog.records]
    assert said("answers again")
    assert loud(caplog.records) == []

    await get_channel_layer().group_send(CHANNEL_GROUP, alert(2))
    for socket in (alerts, late):
        got = await socket.receive_json_from(timeout=15)
        assert got["text"] == "[ALERT] test 2"
    assert "rows" in await live.receive_json_from(timeout=15)
    await close(alerts, late, live)
