"""Run by the conformance tests in a child process: the official C++ pull consumer walks every
queue of a topic once, printing one JSON line per message (os._exit at the end)."""

from __future__ import annotations

import json
import os
import sys

from rocketmq.client import PullConsumer


def text(value: object) -> object:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def main() -> None:
    namesrv, topic, group, expression = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    consumer = PullConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.start()
    for msg in consumer.pull(topic, expression):
        print(
            json.dumps(
                {
                    "body": text(msg.body),
                    "tags": text(msg.tags),
                    "queue_id": msg.queue_id,
                    "queue_offset": msg.queue_offset,
                }
            ),
            flush=True,
        )
    os._exit(0)


if __name__ == "__main__":
    main()
