"""What the delay-level and timer benchmarks (bench/delay.py, bench/timer.py) share:
waiting for a condition, the lateness summary, and reading a schedule queue's store times
(when each delayed message reached the broker)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from servers import percentile  # bench/servers.py

from broker_core.client.consumer.pull import PullConsumer, PullStatus
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.messagequeue import MessageQueue
from broker_core.topics import SCHEDULE_TOPIC


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> None:
    """Poll ``condition`` every 50 ms; end the run with a sentence after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def send_until_routed(producer: Producer, topic: str) -> None:
    """Send one warm-up message to ``topic``, retrying for up to 10 s: a new topic's route
    reaches the nameserver with the broker's next registration."""
    for attempt in range(100):
        try:
            producer.send(Message(topic, b"warm-up"))
            return
        except Exception:
            if attempt == 99:
                raise
            time.sleep(0.1)


def summary(values: list[float]) -> dict[str, float | None]:
    """p50/p90/p99/max/min of ``values`` (ms), rounded; all None when there are none."""
    values = sorted(values)
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None, "min": None}
    return {
        "p50": round(percentile(values, 0.50), 2),
        "p90": round(percentile(values, 0.90), 2),
        "p99": round(percentile(values, 0.99), 2),
        "max": round(values[-1], 2),
        "min": round(values[0], 2),
    }


def schedule_store_times(
    namesrv_addr: str, broker_name: str, queue_id: int, end: int, group: str
) -> dict[int, tuple[int, bytes]]:
    """Queue offset -> (store timestamp, body) of SCHEDULE_TOPIC_XXXX queue ``queue_id``
    (delay level ``queue_id + 1``), offsets 0..end, read by a pull consumer of ``group``."""
    reader = PullConsumer(group, namesrv_addr).start()
    out: dict[int, tuple[int, bytes]] = {}
    try:
        mq = MessageQueue(SCHEDULE_TOPIC, broker_name, queue_id)
        offset = 0
        while offset < end:
            result = reader.pull(mq, "*", offset, 32)
            if result.status is not PullStatus.FOUND:
                if result.next_begin_offset > offset:
                    offset = result.next_begin_offset
                    continue
                break
            for msg in result.messages:
                out[msg.queue_offset] = (msg.store_timestamp, msg.body)
            offset = result.next_begin_offset
    finally:
        reader.shutdown()
    return out
