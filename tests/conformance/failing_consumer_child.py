"""Run by the conformance tests in a child process: an official C++ push consumer whose
listener fails every message (RECONSUME_LATER), printing one JSON line per delivery, until
it has seen the expected number of deliveries or its time runs out.

The Python wrapper turns a listener's exception into CONSUME_SUCCESS (platform notes), so
this registers a raw callback that returns 1 (RECONSUME_LATER) itself.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from rocketmq.client import PushConsumer, RecvMessage

RECONSUME_LATER = 1


def main() -> None:
    namesrv, topic, group, expected = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    seen = 0
    lock = threading.Lock()
    done = threading.Event()

    def raw_callback(_consumer, handle) -> int:  # noqa: ANN001
        nonlocal seen
        msg = RecvMessage(handle)
        body = msg.body.decode("utf-8", "replace") if isinstance(msg.body, bytes) else msg.body
        topic_seen = msg.topic.decode() if isinstance(msg.topic, bytes) else msg.topic
        with lock:
            line = {
                "topic": topic_seen,
                "body": body,
                "reconsume_times": msg.reconsume_times,
                "store_timestamp": msg.store_timestamp,
                "received_at": time.time(),
            }
            print(json.dumps(line), flush=True)
            seen += 1
            if seen >= expected:
                done.set()
        return RECONSUME_LATER

    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, lambda msg: None, "*")
    consumer._unregister_callback()
    consumer._register_callback(raw_callback)
    consumer.start()
    done.wait(timeout=float(os.environ.get("QUIVER_CONSUMER_SECONDS", "40")))
    # Give the last send-back a moment to reach the broker before the process ends.
    threading.Event().wait(1.0)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
