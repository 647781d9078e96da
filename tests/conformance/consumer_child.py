"""Run by the conformance tests in a child process: an official C++ push consumer (PyPI
rocketmq 0.4.4) subscribes to a Quiver topic and prints one JSON line per message until it
has seen the expected number (or QUIVER_CONSUMER_SECONDS run out).  Arguments: namesrv,
topic, group, expected count, tag expression, and optionally "broadcasting" or "orderly".
Exits with os._exit (see producer_child.py)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from rocketmq.client import MessageModel, PushConsumer


def main() -> None:
    namesrv, topic, group, expected, expression = (
        sys.argv[1],
        sys.argv[2],
        sys.argv[3],
        int(sys.argv[4]),
        sys.argv[5],
    )
    seen = 0
    lock = threading.Lock()
    done = threading.Event()

    def on_message(msg) -> None:  # noqa: ANN001
        nonlocal seen
        line = {
            "topic": msg.topic,
            "tags": msg.tags.decode() if isinstance(msg.tags, bytes) else msg.tags,
            "keys": msg.keys.decode() if isinstance(msg.keys, bytes) else msg.keys,
            "body": msg.body.decode("utf-8", "replace") if isinstance(msg.body, bytes) else msg.body,
            "kind": msg.get_property("kind").decode()
            if isinstance(msg.get_property("kind"), bytes)
            else msg.get_property("kind"),
            "id": msg.id,
            "queue_id": msg.queue_id,
            "queue_offset": msg.queue_offset,
            "born_timestamp": msg.born_timestamp,
            "reconsume_times": msg.reconsume_times,
            "received_at": time.time(),
        }
        with lock:
            print(json.dumps(line), flush=True)
            seen += 1
            if seen >= expected:
                done.set()

    model = sys.argv[6] if len(sys.argv) > 6 else "clustering"
    consumer = PushConsumer(
        group,
        orderly=model == "orderly",
        message_model=MessageModel.BROADCASTING if model == "broadcasting" else MessageModel.CLUSTERING,
    )
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message, expression)
    consumer.start()
    done.wait(timeout=float(os.environ.get("QUIVER_CONSUMER_SECONDS", "40")))
    sys.stdout.flush()
    # Optionally stay a little longer: the client commits its offsets every 5 s.
    time.sleep(float(os.environ.get("QUIVER_CONSUMER_LINGER", "0")))
    os._exit(0)


if __name__ == "__main__":
    main()
