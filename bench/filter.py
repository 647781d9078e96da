"""Filtered catch-up: a backlog read through a SQL92 selector beside the same backlog unfiltered.

    python bench/filter.py [--quick] [--count N]

Why: a SQL92 subscription (``MessageSelector.by_sql``) is evaluated by the broker on every
message's properties, read from the commit log, where a tag subscription only compares a
hash in the consume queue.  Issue 21's target: a consumer catching up through a backlog
with a two-term expression moves through it at no less than half the rate of one that
takes everything.

What runs, in one process tree and one run: our nameserver and broker (``python -m
broker_core``, bench/servers.py) with ``enablePropertyFilter = true`` (SQL92 is refused
without it, as in RocketMQ); ``--count`` messages (200,000; ``--quick`` 20,000) of 1 KiB on
8 queues, each with properties ``price`` (0..199) and ``region`` (eu, us, asia in turn),
sent in batches of 32 before the clock starts; then, the broker left to settle before
each, two PushConsumers of new groups from the first offset, listener batches of 32 (as
bench/peers.py's catch-up):

* **unfiltered**: ``*``, timed until every message reached the listener;
* **filtered**: ``price >= 100 AND region <> 'asia'`` (a third of the messages), timed
  until every matching message reached the listener.

Figures: the backlog's messages per second for both (the filtered consumer passes over
every message, handing a third on), the filtered one's delivered messages per second,
their ratio (the target is >= 0.5) and the broker's CPU seconds per run.  The last line is
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's broker_core
sys.path.insert(0, str(HERE))

from servers import create_topic, process_cpu_seconds, settle, start_cluster  # noqa: E402

TOPIC = "FilterBench"
QUEUES = 8
BODY = b"x" * 1024
EXPRESSION = "price >= 100 AND region <> 'asia'"
REGIONS = ("eu", "us", "asia")
BATCH = 32
TARGET = 0.5


def properties(i: int) -> dict[str, str]:
    return {"price": str(i % 200), "region": REGIONS[i % 3]}


def matches(i: int) -> bool:
    return i % 200 >= 100 and REGIONS[i % 3] != "asia"


def preload(namesrv: str, count: int) -> float:
    """Send ``count`` messages in batches of 32; return msgs/s."""
    from broker_core.client.message import Message
    from broker_core.client.producer.producer import Producer

    producer = Producer("FilterBenchProducer", namesrv).start()
    try:
        started = time.perf_counter()
        for start in range(0, count, BATCH):
            producer.send_batch(
                [
                    Message(TOPIC, BODY, properties=properties(i))
                    for i in range(start, min(count, start + BATCH))
                ]
            )
        return count / (time.perf_counter() - started)
    finally:
        producer.shutdown()


def catch_up(namesrv: str, group: str, selector: Any, expected: int, timeout: float) -> dict[str, Any]:
    """A PushConsumer of a new group from the first offset, until ``expected`` messages arrived."""
    from broker_core.client.consumer.push import ConsumeStatus, PushConsumer

    count = [0]
    lock = threading.Lock()
    done = threading.Event()

    def listener(msgs: list[Any]) -> ConsumeStatus:
        with lock:
            count[0] += len(msgs)
            if count[0] >= expected:
                done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group, namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET", consume_message_batch_max_size=BATCH
    )
    consumer.subscribe(TOPIC, selector).register_listener(listener)
    started = time.perf_counter()
    consumer.start()
    done.wait(timeout)
    elapsed = time.perf_counter() - started
    consumer.shutdown()
    return {"received": count[0], "expected": expected, "seconds": round(elapsed, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 messages")
    parser.add_argument("--count", type=int, default=None, help="backlog messages (default 200,000)")
    args = parser.parse_args()
    count = args.count or (20_000 if args.quick else 200_000)
    from broker_core.client.consumer.common import MessageSelector

    wanted = sum(1 for i in range(count) if matches(i))
    work = Path(tempfile.mkdtemp(prefix="quiver-bench-filter-"))
    namesrv, broker = start_cluster(work, [], extra={"enablePropertyFilter": "true"})
    try:
        create_topic(broker.addr, TOPIC, QUEUES)
        print(f"filter benchmark: {count:,} x 1 KiB messages on {QUEUES} queues; broker {broker.addr}")
        sent = preload(namesrv.addr, count)
        print(f"preload (send_batch of {BATCH}):          {sent:12,.0f} msgs/s")
        timeout = max(120.0, count / 1_000)
        runs: dict[str, dict[str, Any]] = {}
        for name, selector, expected in (
            ("unfiltered", "*", count),
            ("filtered", MessageSelector.by_sql(EXPRESSION), wanted),
        ):
            settle(broker)
            cpu = process_cpu_seconds(broker.proc.pid)
            run = catch_up(namesrv.addr, f"FilterBench_{name}", selector, expected, timeout)
            run["broker_cpu_s"] = round(process_cpu_seconds(broker.proc.pid) - cpu, 2)
            run["backlog_msgs_s"] = round(count / run["seconds"]) if run["received"] >= expected else None
            run["delivered_msgs_s"] = round(run["received"] / run["seconds"])
            runs[name] = run
            rate = run["backlog_msgs_s"]
            print(
                f"catch-up {name:<10} {'*' if name == 'unfiltered' else EXPRESSION!r:>38}: "
                f"backlog {rate or 0:9,} msgs/s, delivered {run['delivered_msgs_s']:9,} msgs/s "
                f"({run['received']:,} of {expected:,} in {run['seconds']} s; "
                f"broker CPU {run['broker_cpu_s']} s)"
            )
        plain, filtered = runs["unfiltered"]["backlog_msgs_s"], runs["filtered"]["backlog_msgs_s"]
        ratio = round(filtered / plain, 3) if plain and filtered else None
        print(f"filtered / unfiltered backlog rate:      {ratio}x (target >= {TARGET}x)")
        print(
            json.dumps(
                {
                    "bench": "filter",
                    "messages": count,
                    "expression": EXPRESSION,
                    "matching": wanted,
                    "preload_msgs_s": round(sent),
                    "unfiltered": runs["unfiltered"],
                    "filtered": runs["filtered"],
                    "ratio_filtered_unfiltered": ratio,
                    f"target_ratio_at_least_{TARGET}": None if ratio is None else ratio >= TARGET,
                }
            )
        )
    finally:
        broker.stop()
        namesrv.stop()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
