"""The official client, ``rocketmq==0.4.4`` (child role ``official``): sends and a PushConsumer.

A spec with ``"kind": "push"`` runs the catch-up through its PushConsumer; any other
runs ``threads`` threads sending through one Producer.  Both leave with ``os._exit``:
the client's destructors can hang.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from .frames import BODY_BYTES, PRODUCER_GROUP
from .measure import Arrivals, Window


def official_role(spec: dict[str, Any]) -> None:
    """Child process: the catch-up (``kind`` push) or the sending load of ``spec``."""
    if spec.get("kind") == "push":
        official_push_main(spec)
    else:
        official_main(spec)


def official_main(spec: dict[str, Any]) -> None:
    """Child process: ``threads`` official producers' threads sending until the window ends.

    One Producer (as an application has), ``threads`` threads each calling ``send_sync``
    (or ``send_batch`` of ``batch`` messages) in a loop.  Exits with ``os._exit``: the
    client's destructors can hang.
    """
    from rocketmq.client import Message, Producer

    producer = Producer(PRODUCER_GROUP + "Official", timeout=3000)
    producer.set_namesrv_addr(spec["namesrv"])
    producer.start()
    body = b"q" * BODY_BYTES
    batch = spec["batch"]

    def new_message(n: int) -> Message:
        msg = Message(spec["topic"])
        msg.set_tags("TagA")
        msg.set_body(body)
        return msg

    for _ in range(50):  # routes fetched, connection open (the route may take a moment)
        try:
            if int(producer.send_sync(new_message(0)).status) == 0:
                break
        except Exception:
            time.sleep(0.1)
    start = time.perf_counter() + spec["warmup_s"]
    window = Window(start, start + spec["measure_s"])
    lock = threading.Lock()

    def worker() -> None:
        own = Window(window.start, window.end)  # merged under the lock at the end
        for n in range(10_000_000):
            t0 = time.perf_counter()
            if t0 >= window.end:
                break
            try:
                if batch > 1:
                    result = producer.send_batch([new_message(n) for _ in range(batch)])
                else:
                    result = producer.send_sync(new_message(n))
                error = "" if int(result.status) == 0 else f"status {int(result.status)}"
            except Exception as exc:  # the client raises on timeouts and broker errors
                error = str(exc)[:200] or type(exc).__name__
            t1 = time.perf_counter()
            if error:
                own.error(t1, error)
            elif window.start <= t1 <= window.end:
                own.messages += batch
                own.requests += 1
                own.latencies.append(t1 - t0)
        with lock:
            window.messages += own.messages
            window.requests += own.requests
            window.errors += own.errors
            window.warmup_errors += own.warmup_errors
            window.first_error = window.first_error or own.first_error
            window.latencies.extend(own.latencies)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(spec["threads"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=spec["warmup_s"] + spec["measure_s"] + 20)
    print(json.dumps({**window.summary(), "threads": spec["threads"], "batch": batch}), flush=True)
    os._exit(0)


def official_push_main(spec: dict[str, Any]) -> None:
    """Child process: the official PushConsumer (a new group, default settings) from
    ``start()`` until every message below the ends has reached its callback.

    A new group starts at offset 0 (the broker answers 0 while nothing has expired), so it
    reads the same messages as ours.  Exits with ``os._exit``, as above.
    """
    from rocketmq.client import PushConsumer

    arrivals = Arrivals(spec["ends"])

    def callback(msg: Any) -> None:
        arrivals.add([(msg.queue_id, msg.queue_offset)])

    consumer = PushConsumer(spec["group"])
    consumer.set_namesrv_addr(spec["namesrv"])
    consumer.subscribe(spec["topic"], callback, "*")
    started = time.perf_counter()
    consumer.start()
    print(json.dumps(arrivals.summary(started, spec["timeout_s"])), flush=True)
    os._exit(0)
