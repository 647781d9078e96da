"""Run by the v5 tests in ``.venv-v5``: the official RocketMQ 5 Python client's consumers
against the proxy, printing one JSON line per event for the test to judge.

Arguments: endpoints, topic, group, scenario, then the scenario's numbers.

- ``drain <count> <invisible s>``: a SimpleConsumer receives (batches of 16) and acks until
  ``count`` messages were acked (what it receives beyond is left un-acked) or 30 s pass.
- ``redeliver``: receive one message and do not ack it; receive until it comes back (its
  attempt raised); change that hand-out's invisible duration to 6 s, show nothing comes for
  2 s, then ack with the changed handle.
- ``abandon <seconds>``: receive with a 1 s invisible duration and never ack, for ``seconds``.
- ``fifo <count>``: two SimpleConsumers of one group take one message at a time each and ack
  it, until ``count`` were acked; every receive and ack is printed with a sequence number.
- ``push <count>``: a PushConsumer consumes until ``count`` messages were consumed.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    PushConsumer,
    SimpleConsumer,
)

_lock = threading.Lock()
_seq = 0


def emit(event: str, msg: object = None, **extra: object) -> None:
    global _seq
    with _lock:
        _seq += 1
        line: dict[str, object] = {"event": event, "seq": _seq, **extra}
        if msg is not None:
            line.update(
                body=msg.body.decode(errors="replace"),  # type: ignore[attr-defined]
                message_id=msg.message_id,  # type: ignore[attr-defined]
                attempt=msg.delivery_attempt,  # type: ignore[attr-defined]
                tag=msg.tag,  # type: ignore[attr-defined]
                keys=list(msg.keys or []),  # type: ignore[attr-defined]
                properties=dict(msg.properties or {}),  # type: ignore[attr-defined]
                message_group=msg.message_group,  # type: ignore[attr-defined]
            )
        print(json.dumps(line), flush=True)


def subscription(topic: str) -> dict[str, FilterExpression]:
    """Every message of ``topic``, or those a SQL92 expression accepts (``V5_SQL92``)."""
    sql = os.environ.get("V5_SQL92")
    if sql:
        from rocketmq.grpc_protocol import FilterType

        return {topic: FilterExpression(sql, FilterType.SQL)}
    return {topic: FilterExpression("*")}


def simple(endpoints: str, topic: str, group: str, await_s: int = 2) -> SimpleConsumer:
    credentials = Credentials(os.environ.get("V5_ACCESS_KEY", ""), os.environ.get("V5_SECRET_KEY", ""))
    consumer = SimpleConsumer(
        ClientConfiguration(endpoints, credentials),
        group,
        subscription(topic),
        await_duration=await_s,
    )
    consumer.startup()
    return consumer


def drain(endpoints: str, topic: str, group: str, count: int, invisible: int) -> None:
    consumer = simple(endpoints, topic, group)
    acked = 0
    deadline = time.monotonic() + 30
    try:
        while acked < count and time.monotonic() < deadline:
            for msg in consumer.receive(16, invisible):
                emit("received", msg)
                if acked < count:  # the rest stay in flight until their invisible time ends
                    consumer.ack(msg)
                    emit("acked", msg)
                    acked += 1
    finally:
        consumer.shutdown()


def redeliver(endpoints: str, topic: str, group: str) -> None:
    consumer = simple(endpoints, topic, group)
    try:
        first = None
        deadline = time.monotonic() + 20
        while first is None and time.monotonic() < deadline:
            got = consumer.receive(1, 2)
            first = got[0] if got else None
        assert first is not None, "nothing to receive"
        emit("received", first)
        again = None
        while again is None and time.monotonic() < deadline:
            for msg in consumer.receive(1, 2):
                if msg.message_id == first.message_id:
                    again = msg
                else:
                    consumer.ack(msg)
        assert again is not None, "the message did not come back"
        emit("received", again)
        consumer.change_invisible_duration(again, 6)
        emit("changed")
        quiet_until = time.monotonic() + 2.5
        while time.monotonic() < quiet_until:
            for msg in consumer.receive(1, 2):
                emit("received", msg)
        consumer.ack(again)
        emit("acked", again)
    finally:
        consumer.shutdown()


def abandon(endpoints: str, topic: str, group: str, seconds: float) -> None:
    consumer = simple(endpoints, topic, group, await_s=1)
    try:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            for msg in consumer.receive(16, 1):
                emit("received", msg)
    finally:
        consumer.shutdown()


def fifo(endpoints: str, topic: str, group: str, count: int) -> None:
    consumers = [simple(endpoints, topic, group, await_s=1) for _ in range(2)]
    acked: list[int] = [0]
    deadline = time.monotonic() + 40

    def work(index: int, consumer: SimpleConsumer) -> None:
        while time.monotonic() < deadline:
            with _lock:
                if acked[0] >= count:
                    return
            for msg in consumer.receive(1, 10):
                emit("received", msg, consumer=index)
                time.sleep(0.02)
                emit("acking", msg, consumer=index)
                consumer.ack(msg)
                with _lock:
                    acked[0] += 1

    threads = [threading.Thread(target=work, args=(i, c)) for i, c in enumerate(consumers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for consumer in consumers:
        consumer.shutdown()


class Collector(MessageListener):
    def __init__(self) -> None:
        self.count = 0

    def consume(self, message: object) -> ConsumeResult:
        emit("consumed", message)
        with _lock:
            self.count += 1
        return ConsumeResult.SUCCESS


def push(endpoints: str, topic: str, group: str, count: int) -> None:
    listener = Collector()
    credentials = Credentials(os.environ.get("V5_ACCESS_KEY", ""), os.environ.get("V5_SECRET_KEY", ""))
    consumer = PushConsumer(
        ClientConfiguration(endpoints, credentials), group, listener, {topic: FilterExpression("*")}
    )
    consumer.startup()
    try:
        deadline = time.monotonic() + 40
        while listener.count < count and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # anything more would be a duplicate: let it show
    finally:
        consumer.shutdown()


def main() -> None:
    endpoints, topic, group, scenario, *numbers = sys.argv[1:]
    args = [int(n) for n in numbers]
    try:
        if scenario == "drain":
            drain(endpoints, topic, group, *args)
        elif scenario == "redeliver":
            redeliver(endpoints, topic, group)
        elif scenario == "abandon":
            abandon(endpoints, topic, group, *args)
        elif scenario == "fifo":
            fifo(endpoints, topic, group, *args)
        elif scenario == "push":
            push(endpoints, topic, group, *args)
        else:
            raise SystemExit(f"unknown scenario {scenario}")
    except Exception as exc:  # noqa: BLE001 - the test reads what happened
        emit("error", error=f"{type(exc).__name__}: {exc}")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
