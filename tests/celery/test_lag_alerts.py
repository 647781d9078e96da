"""Lag alerts raised and resolved through a real Celery worker (issue 7).

A real nameserver and broker, the platform's Celery worker (and beat), a real consumer
group with lag: the check task goes through Redis to the worker, which reads the broker,
writes the alert to the platform's database, pushes it over Channels (Redis) to a
websocket of this process, and posts it to a webhook — a tiny http.server here, the one
outside system of the test.  The platform's database is the worker's own SQLite file,
saved and read here directly.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model

from broker_core.client.consumer.push import PushConsumer
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from console.alerts.services import CHECKS_KEY, LAST_CHECK_KEY
from console.celery import app as celery_app
from console.core.brokers import admin_call
from console.core.models import ClusterAccess
from console.routing import websocket_urlpatterns

from .conftest import REPO, Collector, Platform, free_port, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

GROUP = "alerted-group"
TOPIC = "AlertTopic"


class Hook:
    """A webhook receiver on 127.0.0.1: keeps every JSON body POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length))
                with hook.lock:
                    hook.bodies.append(body)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[tuple[str, str]]:
        with self.lock:
            return [(b["event"], b["alert"]["kind"]) for b in self.bodies]


@pytest.fixture
def hook() -> Iterator[Hook]:
    found = Hook()
    yield found
    found.server.shutdown()


class PlatformDB:
    """The worker's own database: thresholds saved through its Django, alerts read from its
    SQLite file (this process's Django runs on the test database)."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        self.path = platform.data_dir / "console.sqlite3"

    def save_monitor(self, **fields: Any) -> None:
        code = f"from console.groups.models import GroupMonitor; GroupMonitor.objects.create(**{fields!r})"
        done = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", code],
            cwd=REPO,
            env=self.platform.env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr

    def alerts(self, **where: Any) -> list[dict[str, Any]]:
        clause = " AND ".join(f'"{k}" = ?' for k in where) or "1"
        with contextlib.closing(sqlite3.connect(self.path, timeout=30)) as db:
            db.row_factory = sqlite3.Row
            rows = db.execute(f"SELECT * FROM alerts_alert WHERE {clause} ORDER BY id", tuple(where.values()))
            return [dict(row) for row in rows]


@pytest.fixture
def platform_db(platform: Platform) -> PlatformDB:
    return PlatformDB(platform)


@pytest.fixture
def channels_on_redis(platform: Platform, settings: Any) -> None:
    """This process's channel layer on the platform's Redis, where the worker sends."""
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [platform.redis_url]},
        }
    }


def consume(platform: Platform, listener: Collector, until: int) -> None:
    """Run the group's consumer until ``listener`` has ``until`` messages; offsets are committed
    when it shuts down."""
    consumer = (
        PushConsumer(GROUP, platform.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        .subscribe(TOPIC)
        .register_listener(listener)
        .start()
    )
    try:
        wait_for(lambda: listener.count() >= until, 60, f"{until} consumed messages")
    finally:
        consumer.shutdown()


def group_lag(platform: Platform) -> int | None:
    from console.groups.services import group_rows

    rows, unreadable = admin_call(platform.namesrv_addr, group_rows)
    row = next((r for r in rows if r["group"] == GROUP), None)
    return None if unreadable or row is None else row["lag"]


def open_alerts(db: PlatformDB) -> dict[str, dict[str, Any]]:
    return {a["kind"]: a for a in db.alerts(group=GROUP) if a["resolved_at"] is None}


def checks_done(platform: Platform) -> int:
    return int(platform.redis.get(CHECKS_KEY) or 0)


def check(platform: Platform) -> None:
    """Send the beat job's task to the worker, as beat does, and wait until it has run."""
    before = checks_done(platform)
    celery_app.send_task("console.alerts.tasks.check_lag_alerts")
    wait_for(lambda: checks_done(platform) > before, 60, "the alert check")


async def commit_every_queue_at_its_end(admin: Any) -> None:
    """The group's offset on every queue of the topic (not only those it has read) at the end."""
    stats = await admin.topic_stats(TOPIC)
    await admin.reset_offsets_exactly(GROUP, {q.queue: q.max_offset for q in stats.queues})


def produce(platform: Platform, bodies: list[bytes]) -> None:
    producer = Producer("alert-producer", platform.namesrv_addr).start()
    try:
        for body in bodies:
            producer.send(Message(TOPIC, body))
    finally:
        producer.shutdown()


async def test_an_alert_is_raised_and_resolved_through_the_worker(
    platform: Platform, platform_db: PlatformDB, channels_on_redis: None, console_redis: Any, hook: Hook
) -> None:
    # The broker calls and database reads below block: off the event loop, and off the thread
    # the socket's own database look-ups use.
    run = functools.partial(sync_to_async, thread_sensitive=False)
    viewer = await run(get_user_model().objects.create_user)("alert-viewer", password="pw-alerts-123")
    await run(ClusterAccess.objects.create)(user=viewer, cluster="*", role="viewer")
    socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/alerts/")
    socket.scope["user"] = viewer
    connected, _ = await socket.connect()
    assert connected
    port = free_port()
    listener = Collector()
    broker = contextlib.ExitStack()
    try:
        await run(broker.enter_context)(platform.broker("broker-alerts", port, autoCreateTopicEnable="true"))
        await run(produce)(platform, [b"warm-up"])
        await run(consume)(platform, listener, 1)
        await run(admin_call)(platform.namesrv_addr, commit_every_queue_at_its_end)
        await run(wait_for)(lambda: group_lag(platform) == 0, 30, "the group caught up")
        await run(produce)(platform, [f"behind-{i}".encode() for i in range(6)])
        await run(wait_for)(lambda: group_lag(platform) == 6, 30, "a lag of 6")
        await run(platform_db.save_monitor)(
            cluster="default", group=GROUP, max_lag=3, max_seconds_behind=0, webhook_url=hook.url
        )
        await run(check)(platform)
        alerts = await run(open_alerts)(platform_db)
        assert set(alerts) == {"lag", "seconds_behind"}
        assert alerts["lag"]["value"] == 6 and alerts["lag"]["threshold"] == 3
        assert alerts["seconds_behind"]["value"] > 0
        pushed = [await socket.receive_json_from(timeout=30) for _ in range(2)]
        assert sorted((p["event"], p["alert"]["kind"]) for p in pushed) == [
            ("raised", "lag"),
            ("raised", "seconds_behind"),
        ]
        assert {p["alert"]["id"] for p in pushed} == {a["id"] for a in alerts.values()}
        await run(wait_for)(lambda: len(hook.events()) == 2, 30, "two webhook posts")
        assert sorted(hook.events()) == [("raised", "lag"), ("raised", "seconds_behind")]
        lag_alert = alerts["lag"]["id"]

        def delivered() -> bool:
            return platform_db.alerts(id=lag_alert)[0]["webhook_status"] == "delivered"

        await run(wait_for)(delivered, 30, "the delivery recorded")
        await run(check)(platform)  # the lag unchanged: nothing new is raised

        # The broker is down: its lag is unknown, and unknown is not zero.
        await run(broker.close)()
        await run(check)(platform)
        last = json.loads(platform.redis.get(LAST_CHECK_KEY))
        assert last["unknown"] and last["resolved"] == 0, last
        assert set(await run(open_alerts)(platform_db)) == {"lag", "seconds_behind"}
        assert await socket.receive_nothing(timeout=1)

        await run(broker.enter_context)(platform.broker("broker-alerts", port, autoCreateTopicEnable="true"))
        await run(consume)(platform, listener, 7)  # the backlog is consumed
        await run(wait_for)(lambda: group_lag(platform) == 0, 30, "the group caught up again")
        await run(check)(platform)
        assert await run(open_alerts)(platform_db) == {}
        pushed = [await socket.receive_json_from(timeout=30) for _ in range(2)]
        assert sorted((p["event"], p["alert"]["kind"]) for p in pushed) == [
            ("resolved", "lag"),
            ("resolved", "seconds_behind"),
        ]
        await run(wait_for)(lambda: len(hook.events()) == 4, 30, "the resolve posts")
    finally:
        # Cancelling the socket's pending Redis read may surface as redis-py's TimeoutError
        # (channels_redis' receive loop): the socket is gone either way.
        with contextlib.suppress(TimeoutError, redis.exceptions.TimeoutError):
            await socket.disconnect()
        await run(broker.close)()
    (done,) = platform_db.alerts(id=lag_alert)
    assert done["resolved_at"] is not None and done["last_value"] == 0 and done["value"] == 6
    assert "within 3" in done["resolution"] and done["webhook_status"] == "delivered"
    assert done["webhook_attempts"] == 2  # one post for the raise, one for the resolve
    assert sorted(hook.events()[2:]) == [("resolved", "lag"), ("resolved", "seconds_behind")]
    assert len(platform_db.alerts(group=GROUP)) == 2  # the unchanged check raised nothing new
