"""RabbitMQ through pika: a durable classic queue, persistent messages, publisher confirms."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

from ..measure import (
    Latencies,
    Meter,
    catchup_result,
    catchup_timeout,
    loop,
    pace,
    settle_process,
    threads_loop,
)
from ..workload import ADDRS, BODY, CONSUME_BATCH, PREFETCH, SYNC_THREADS, WINDOW, Settings, Unavailable


class Rabbit:
    """RabbitMQ through pika: a durable classic queue, persistent messages, publisher confirms."""

    creates_own_topic = False

    def __init__(self, spec: dict[str, Any]) -> None:
        try:
            import pika
        except ImportError as exc:
            raise Unavailable(f"pika not installed: {exc}") from None
        self.pika = pika
        self.name = spec.get("name", "")
        host, port = ADDRS["rabbitmq"]
        self.params = pika.ConnectionParameters(
            host,
            port,
            credentials=pika.PlainCredentials("guest", "guest"),
            connection_attempts=1,
            socket_timeout=5,
            blocked_connection_timeout=60,
        )
        self.persistent = pika.BasicProperties(delivery_mode=2)
        try:
            self.conn = pika.BlockingConnection(self.params)
        except pika.exceptions.AMQPConnectionError as exc:
            raise Unavailable(f"not running: {type(exc).__name__}: {exc!r}") from None
        self.channel = self.conn.channel()

    def describe(self) -> dict[str, Any]:
        props = self.conn._impl.server_properties  # the broker's connection.start properties
        return {
            "server": f"{props.get('product', 'RabbitMQ')} {props.get('version', '?')}",
            "durability": (
                "durable classic queue, persistent messages (delivery_mode=2), publisher confirms: "
                "a message is confirmed once written to disk (fsync'd, in groups), or once "
                "consumed if that comes first"
            ),
            "client": f"pika {version('pika')}",
        }

    def create(self) -> None:
        self.channel.queue_declare(self.name, durable=True)

    def delete(self, name: str) -> None:
        self.channel.queue_delete(name)

    def sync(self, s: Settings) -> dict[str, Any]:
        self.channel.confirm_delivery()

        def publish() -> int:
            self.channel.basic_publish("", self.name, BODY, self.persistent)  # raises on a nack
            return 1

        return loop(s, publish)

    def sync8(self, s: Settings) -> dict[str, Any]:
        pika = self.pika
        connections: list[Any] = []

        def sender() -> Callable[[], int]:
            # pika's BlockingConnection is not thread-safe: a connection and channel each.
            conn = pika.BlockingConnection(self.params)
            connections.append(conn)
            channel = conn.channel()
            channel.confirm_delivery()

            def publish() -> int:
                channel.basic_publish("", self.name, BODY, self.persistent)  # raises on a nack
                return 1

            return publish

        try:
            return threads_loop(s, SYNC_THREADS, sender)
        finally:
            for conn in connections:
                with contextlib.suppress(Exception):
                    conn.close()

    def batch(self, s: Settings) -> dict[str, Any]:
        meter = Meter.of(s)
        self.publish_window(meter, None)
        return meter.result()

    def publish_window(self, meter: Meter | None, count: int | None) -> float:
        """Publish with up to ``WINDOW`` messages unconfirmed (a SelectConnection; acks and
        nacks may confirm many tags at once), until the meter's window ends or ``count``
        were published; returns msgs/s.  Raises when the connection fails."""
        pika = self.pika
        pending: dict[int, None] = {}  # unconfirmed delivery tags, ascending
        state: dict[str, Any] = {"published": 0, "closing": False, "error": ""}
        channel: list[Any] = []

        def finished() -> bool:
            if meter is not None:
                return not meter.running() or meter.errors > 100
            return state["published"] >= (count or 0)

        def fill() -> None:
            ch = channel[0]
            while len(pending) < WINDOW and not finished():
                ch.basic_publish("", self.name, BODY, self.persistent)
                state["published"] += 1
                pending[state["published"]] = None
            if finished() and not pending and not state["closing"]:
                state["closing"] = True
                conn.close()

        def on_confirm(frame: Any) -> None:
            method = frame.method
            confirmed = 0
            if method.multiple:
                while pending:
                    tag = next(iter(pending))
                    if tag > method.delivery_tag:
                        break
                    del pending[tag]
                    confirmed += 1
            elif method.delivery_tag in pending:
                del pending[method.delivery_tag]
                confirmed = 1
            if meter is not None:
                if isinstance(method, pika.spec.Basic.Ack):
                    meter.acked(confirmed)
                else:
                    for _ in range(confirmed):
                        meter.error(RuntimeError("nacked by the broker"))
            fill()

        def on_channel(ch: Any) -> None:
            channel.append(ch)
            ch.confirm_delivery(on_confirm, callback=lambda _frame: fill())

        def on_failed(_conn: Any, error: Any) -> None:
            state["error"] = repr(error)
            _conn.ioloop.stop()

        def on_closed(_conn: Any, reason: Any) -> None:
            if not state["closing"]:
                state["error"] = repr(reason)
            _conn.ioloop.stop()

        def on_timeout() -> None:
            state["error"] = "timed out"
            state["closing"] = True
            conn.close()

        conn = pika.SelectConnection(
            self.params,
            on_open_callback=lambda c: c.channel(on_open_callback=on_channel),
            on_open_error_callback=on_failed,
            on_close_callback=on_closed,
        )
        budget = (meter.end - time.perf_counter() + 30) if meter is not None else 30 + (count or 0) / 1000
        conn.ioloop.call_later(budget, on_timeout)
        started = time.perf_counter()
        conn.ioloop.start()
        if state["error"]:
            raise RuntimeError(f"windowed publish failed: {state['error']}")
        return state["published"] / (time.perf_counter() - started)

    def catchup(self, s: Settings, settle_pid: int | None) -> dict[str, Any]:
        preload = self.publish_window(None, s.count)
        settle_process(settle_pid)
        count = [0]
        started = time.perf_counter()
        ch = self.conn.channel()
        ch.basic_qos(prefetch_count=PREFETCH)

        def on_message(ch: Any, method: Any, _props: Any, _body: bytes) -> None:
            count[0] += 1
            if count[0] % CONSUME_BATCH == 0 or count[0] >= s.count:
                ch.basic_ack(method.delivery_tag, multiple=True)
            if count[0] >= s.count:
                ch.stop_consuming()

        tag = ch.basic_consume(self.name, on_message, auto_ack=False)
        timer = self.conn.call_later(catchup_timeout(s), ch.stop_consuming)
        ch.start_consuming()
        ch.basic_cancel(tag)
        ch.queue_declare(self.name, passive=True)  # a round trip after the last ack
        elapsed = time.perf_counter() - started
        self.conn.remove_timeout(timer)
        ch.close()  # anything unacked goes back to the queue, so the count below shows it
        left = self.channel.queue_declare(self.name, passive=True).method.message_count
        return catchup_result(
            count[0],
            s.count,
            elapsed,
            preload_msgs_s=round(preload),
            unacked=left,
            acks=f"basic_ack multiple=True every {CONSUME_BATCH}, prefetch {PREFETCH}",
        )

    def latency(self, s: Settings) -> dict[str, Any]:
        stop = threading.Event()
        ready = threading.Event()
        lat = Latencies(s)
        problems: list[str] = []

        def consume() -> None:
            try:
                conn = self.pika.BlockingConnection(self.params)  # pika: one connection per thread
                ch = conn.channel()
                ch.basic_qos(prefetch_count=PREFETCH)

                def on_message(ch: Any, method: Any, _props: Any, body: bytes) -> None:
                    lat.got(body)
                    ch.basic_ack(method.delivery_tag)

                ch.basic_consume(self.name, on_message, auto_ack=False)
                ready.set()
                while not stop.is_set():
                    conn.process_data_events(time_limit=0.05)
                conn.close()
            except Exception as exc:
                problems.append(f"consumer: {type(exc).__name__}: {exc}")
                ready.set()

        thread = threading.Thread(target=consume, daemon=True)
        thread.start()
        ready.wait(10)
        self.channel.confirm_delivery()
        sent, errors, first = pace(
            lat, lambda body: self.channel.basic_publish("", self.name, body, self.persistent)
        )
        lat.wait_all(sent)
        stop.set()
        thread.join(5)
        return lat.result(sent, errors, first or (problems[0] if problems else ""))
