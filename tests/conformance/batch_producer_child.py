"""Run by the conformance tests in a child process: the official C++ client sends one batch of
``count`` messages of ``size`` bytes each, and prints one JSON line with the result.

From 4 KiB the client zlib-compresses a batch body as a whole (sysFlag bit 0), so a batch of
a few 1 KiB messages arrives compressed.  Exits with os._exit: the client's destructors can
hang.
"""

from __future__ import annotations

import json
import os
import sys

from rocketmq.client import Message, Producer


def main() -> None:
    namesrv, topic, count, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    producer = Producer("ConformanceBatchProducer")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    messages = []
    for i in range(count):
        msg = Message(topic)
        msg.set_keys(f"batch-{i}")
        msg.set_tags("TagA")
        msg.set_body((b"%06d" % i) * (size // 6))
        messages.append(msg)
    try:
        result = producer.send_batch(messages)
        line = {"status": int(result.status), "offset": result.offset}
    except Exception as exc:  # the wrapper raises an empty ProducerSendSyncFailed
        line = {"error": type(exc).__name__}
    print(json.dumps(line), flush=True)
    producer.shutdown()
    os._exit(0)


if __name__ == "__main__":
    main()
