"""Run by the conformance tests in a child process: the official C++ client (PyPI rocketmq 0.4.4)
sends to a Quiver nameserver/broker and prints one JSON line per result.

A child process because the client can block far past its timeouts against a peer that
misbehaves, and its destructors can hang: the parent enforces a hard timeout, and this
exits with os._exit.
"""

from __future__ import annotations

import json
import os
import sys
import threading

from rocketmq.client import Message, Producer


def message(topic: str, i: int, kind: str) -> Message:
    msg = Message(topic)
    msg.set_keys(f"key-{kind}-{i} order-{i}")
    msg.set_tags("TagA" if i % 2 == 0 else "TagB")
    msg.set_body(f"{kind}-{i}-é".encode())
    msg.set_property("kind", kind)
    msg.set_property("index", str(i))
    return msg


_print_lock = threading.Lock()


def emit(line: dict) -> None:
    """One JSON line; the client calls back on its own threads, so lines must not interleave."""
    with _print_lock:
        print(json.dumps(line), flush=True)


def main() -> None:
    namesrv, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    producer = Producer("ConformanceProducer")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    for i in range(count):
        result = producer.send_sync(message(topic, i, "sync"))
        emit({"kind": "sync", "status": int(result.status), "msg_id": result.msg_id, "offset": result.offset})
    done = threading.Semaphore(0)
    for i in range(count):

        def ok(result, i=i):  # noqa: ANN001
            emit({"kind": "async", "status": int(result.status), "msg_id": result.msg_id})
            done.release()

        def failed(exc, i=i):  # noqa: ANN001
            emit({"kind": "async", "error": str(exc)})
            done.release()

        producer.send_async(message(topic, i, "async"), ok, failed)
    for _ in range(count):
        done.acquire(timeout=20)
    for i in range(count):
        producer.send_oneway(message(topic, i, "oneway"))
    for i in range(count):
        result = producer.send_orderly(message(topic, i, "orderly"), i % 3)  # hash selector on an int key
        emit({"kind": "orderly", "status": int(result.status), "offset": result.offset})
    batch = producer.send_batch([message(topic, i, "batch") for i in range(count)])
    emit({"kind": "batch", "status": int(batch.status), "offset": batch.offset})
    producer.shutdown()
    os._exit(0)


if __name__ == "__main__":
    main()
