"""Our client, ``broker_core.client`` (child role ``ours``): Producer modes and consumers.

In a child process of its own, as the official client has: ``send`` runs one Producer
through each of the spec's modes (``sync`` from threads, ``async`` with a window of
futures, ``batch``), ``push`` and ``pull`` catch up with a PushConsumer or a
PullConsumer.  Prints one JSON line.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from typing import Any

from .frames import BATCH, BODY_BYTES, PRODUCER_GROUP, PULL_BATCH
from .measure import Arrivals, Tally, Window


def ours_send_mode(producer: Any, spec: dict[str, Any], mode: dict[str, Any]) -> dict[str, Any]:
    """One producer mode against the target: ``sync`` (threads), ``async`` (window), ``batch``."""
    from broker_core.client.message import Message

    body = b"q" * BODY_BYTES
    topic = spec["topic"]
    start = time.perf_counter() + spec["warmup_s"]
    tally = Tally(Window(start, start + spec["measure_s"]))
    end = tally.window.end

    def new_message() -> Message:
        return Message(topic, body, tags="TagA")  # the producer adds the UNIQ_KEY

    def error_text(exc: BaseException) -> str:
        return f"{type(exc).__name__}: {str(exc)[:200]}"

    if mode["kind"] == "async":
        slots = threading.Semaphore(mode["window"])

        def on_done(t0: float, future: Any) -> None:
            exc = future.exception()
            tally.done(t0, time.perf_counter(), 1, error_text(exc) if exc else "")
            slots.release()

        while time.perf_counter() < end:
            if not slots.acquire(timeout=10):
                break
            t0 = time.perf_counter()
            try:
                future = producer.send_async(new_message())
            except Exception as exc:  # not even submitted
                tally.done(t0, time.perf_counter(), 1, error_text(exc))
                slots.release()
                continue
            future.add_done_callback(lambda f, t0=t0: on_done(t0, f))
        for _ in range(mode["window"]):  # the last ones answered (bounded)
            if not slots.acquire(timeout=10):
                break
        return {**tally.window.summary(), **mode}

    batch = mode["kind"] == "batch"

    def worker() -> None:
        for _ in range(10_000_000):
            t0 = time.perf_counter()
            if t0 >= end:
                break
            error = ""
            try:
                if batch:
                    producer.send_batch([new_message() for _ in range(BATCH)])
                else:
                    producer.send(new_message())
            except Exception as exc:  # typed client errors: timeout, refused...
                error = error_text(exc)
            tally.done(t0, time.perf_counter(), BATCH if batch else 1, error)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(mode["threads"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=spec["warmup_s"] + spec["measure_s"] + 20)
    return {**tally.window.summary(), **mode}


def ours_send(spec: dict[str, Any]) -> dict[str, Any]:
    """Our Producer (one, as an application has) through each of ``spec["modes"]`` in turn."""
    from broker_core.client.message import Message
    from broker_core.client.producer.producer import Producer

    producer = Producer(PRODUCER_GROUP + "Ours", spec["namesrv"]).start()
    try:
        for _ in range(50):  # route fetched, connection open
            try:
                producer.send(Message(spec["topic"], b"q" * BODY_BYTES, tags="TagA"))
                break
            except Exception:
                time.sleep(0.1)
        return {mode["name"]: ours_send_mode(producer, spec, mode) for mode in spec["modes"]}
    finally:
        producer.shutdown()


def ours_push(spec: dict[str, Any]) -> dict[str, Any]:
    """Our PushConsumer, a new group from the first offset, default settings (20 consume
    threads, one message per listener call): from ``start()`` until every message below
    the ends has reached the listener."""
    from broker_core.client.consumer.push import ConsumeStatus, PushConsumer

    arrivals = Arrivals(spec["ends"])

    def listener(msgs: list[Any]) -> ConsumeStatus:
        arrivals.add([(m.queue_id, m.queue_offset) for m in msgs])
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(spec["group"], spec["namesrv"], consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(spec["topic"], "*").register_listener(listener)
    started = time.perf_counter()
    consumer.start()
    try:
        return arrivals.summary(started, spec["timeout_s"])
    finally:
        threading.Thread(target=consumer.shutdown, daemon=True).start()
        time.sleep(0.5)  # a moment to commit; the process exits anyway


def ours_pull(spec: dict[str, Any]) -> dict[str, Any]:
    """Our PullConsumer: one thread per queue calling ``pull`` (32 at a time) to the queue's
    end, as the raw catch-up keeps one pull in flight per queue."""
    from broker_core.client.consumer.pull import PullConsumer

    consumer = PullConsumer(spec["group"], spec["namesrv"]).start()
    arrivals = Arrivals(spec["ends"])
    errors: list[str] = []
    try:
        queues = consumer.fetch_queues(spec["topic"])

        def worker(mq: Any) -> None:
            offset, end = 0, spec["ends"][mq.queue_id]
            deadline = time.perf_counter() + spec["timeout_s"]
            while offset < end and time.perf_counter() < deadline:
                try:
                    result = consumer.pull(mq, "*", offset, PULL_BATCH)
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                    return
                arrivals.add([(m.queue_id, m.queue_offset) for m in result.messages])
                if result.next_begin_offset <= offset:
                    return  # nothing more there
                offset = result.next_begin_offset

        started = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(mq,), daemon=True) for mq in queues]
        for thread in threads:
            thread.start()
        out = arrivals.summary(started, spec["timeout_s"])
        return {**out, "errors": len(errors), "first_error": errors[0] if errors else ""}
    finally:
        consumer.shutdown()


def ours_main(spec: dict[str, Any]) -> None:
    """Child process: one of our clients' loads; prints its result as one JSON line."""
    runs = {"send": ours_send, "push": ours_push, "pull": ours_pull}
    gc.collect()
    gc.freeze()
    result = runs[spec["kind"]](spec)
    print(json.dumps(result), flush=True)
    os._exit(0)  # daemon threads of a consumer still shutting down need not be waited for
