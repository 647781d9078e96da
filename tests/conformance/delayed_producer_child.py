"""Run by the conformance tests in a child process: the official C++ producer sends one
message with a delay level and prints the wall-clock time just before sending."""

from __future__ import annotations

import json
import os
import sys
import time

from rocketmq.client import Message, Producer


def main() -> None:
    namesrv, topic, level = sys.argv[1], sys.argv[2], int(sys.argv[3])
    producer = Producer("DelayedProducer")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    msg = Message(topic)
    msg.set_body(b"later")
    msg.set_tags("Delayed")
    msg.set_delay_time_level(level)
    sent_at = time.time()
    result = producer.send_sync(msg)
    print(json.dumps({"status": int(result.status), "sent_at": sent_at}), flush=True)
    producer.shutdown()
    os._exit(0)


if __name__ == "__main__":
    main()
