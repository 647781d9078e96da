"""Redis Streams through redis-py (with hiredis when installed): XADD, XREADGROUP + XACK."""

from __future__ import annotations

import threading
import time
from importlib.metadata import version
from typing import Any

from ..measure import Latencies, catchup_result, catchup_timeout, loop, pace, settle_process, threads_loop
from ..workload import ADDRS, BATCH, BODY, CONSUME_BATCH, SYNC_THREADS, Settings, Unavailable


class Redis:
    """Redis Streams through redis-py: XADD, XREADGROUP + XACK."""

    creates_own_topic = False

    def __init__(self, spec: dict[str, Any]) -> None:
        try:
            import redis
        except ImportError as exc:
            raise Unavailable(f"redis-py not installed: {exc}") from None
        self.redis = redis
        self.name = spec.get("name", "")
        host, port = ADDRS["redis"]
        self.client = redis.Redis(host=host, port=port, socket_connect_timeout=3, socket_timeout=30)
        try:
            self.client.ping()
        except redis.ConnectionError as exc:
            raise Unavailable(f"not running: {exc}") from None

    def describe(self) -> dict[str, Any]:
        info = self.client.info("server")
        try:
            appendonly = self.client.config_get("appendonly").get("appendonly")
            save = self.client.config_get("save").get("save")
            found = f"CONFIG GET found appendonly={appendonly!r}, save={save!r}"
        except self.redis.ResponseError as exc:
            appendonly = save = None
            found = f"CONFIG GET refused ({exc})"
        if appendonly == "no" and save == "":
            what = "no persistence at all: XADD is answered from memory and a restart loses every stream"
        elif appendonly == "yes":
            what = "append-only file on (fsync as appendfsync says): XADD is answered before any fsync"
        else:
            what = "RDB snapshots only (save rules): XADD is answered from memory"
        try:
            import hiredis  # noqa: F401

            parser = "hiredis reply parser"
        except ImportError:
            parser = "pure-Python reply parser (no hiredis)"
        return {
            "server": f"redis {info.get('redis_version')}",
            "durability": f"{found}: {what}",
            "client": f"redis-py {version('redis')}, {parser}",
            "appendonly": appendonly,
            "save": save,
        }

    def create(self) -> None:
        """Nothing: a stream comes into being with its first XADD (or XGROUP CREATE MKSTREAM)."""

    def delete(self, name: str) -> None:
        self.client.delete(name)

    def sync(self, s: Settings) -> dict[str, Any]:
        return loop(s, lambda: self.client.xadd(self.name, {"b": BODY}) and 1)

    def sync8(self, s: Settings) -> dict[str, Any]:
        # redis-py's client is thread-safe: each thread takes a connection of the pool.
        return threads_loop(s, SYNC_THREADS, lambda: lambda: self.client.xadd(self.name, {"b": BODY}) and 1)

    def batch(self, s: Settings) -> dict[str, Any]:
        pipe = self.client.pipeline(transaction=False)

        def send() -> int:
            for _ in range(BATCH):
                pipe.xadd(self.name, {"b": BODY})
            return len(pipe.execute())

        return loop(s, send)

    def catchup(self, s: Settings, settle_pid: int | None) -> dict[str, Any]:
        started = time.perf_counter()
        pipe = self.client.pipeline(transaction=False)
        for start in range(0, s.count, CONSUME_BATCH):
            for _ in range(min(CONSUME_BATCH, s.count - start)):
                pipe.xadd(self.name, {"b": BODY})
            pipe.execute()
        preload = s.count / (time.perf_counter() - started)
        settle_process(settle_pid)
        group = "peers"
        count = 0
        started = time.perf_counter()
        self.client.xgroup_create(self.name, group, id="0")
        deadline = started + catchup_timeout(s)
        while count < s.count and time.perf_counter() < deadline:
            reply = self.client.xreadgroup(group, "c1", {self.name: ">"}, count=CONSUME_BATCH, block=1000)
            if not reply:
                continue
            ids = [entry_id for entry_id, _ in reply[0][1]]
            self.client.xack(self.name, group, *ids)
            count += len(ids)
        elapsed = time.perf_counter() - started
        pending = self.client.xpending(self.name, group)["pending"]
        return catchup_result(
            count,
            s.count,
            elapsed,
            preload_msgs_s=round(preload),
            unacked=pending,
            acks="XACK of each batch's ids",
        )

    def latency(self, s: Settings) -> dict[str, Any]:
        group = "peers"
        self.client.xgroup_create(self.name, group, id="$", mkstream=True)
        host, port = ADDRS["redis"]
        reader = self.redis.Redis(host=host, port=port, socket_timeout=30)
        stop = threading.Event()
        lat = Latencies(s)

        def consume() -> None:
            while not stop.is_set():
                reply = reader.xreadgroup(group, "c1", {self.name: ">"}, count=CONSUME_BATCH, block=100)
                if not reply:
                    continue
                entries = reply[0][1]
                for _, fields in entries:
                    lat.got(fields[b"b"])
                reader.xack(self.name, group, *[entry_id for entry_id, _ in entries])

        thread = threading.Thread(target=consume, daemon=True)
        thread.start()
        sent, errors, first = pace(lat, lambda body: self.client.xadd(self.name, {"b": body}))
        lat.wait_all(sent)
        stop.set()
        thread.join(5)
        return lat.result(sent, errors, first)
