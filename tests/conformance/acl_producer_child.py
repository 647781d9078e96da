"""Run by the conformance tests in a child process: the official producer sends one message
with session credentials and prints {"status": ...} or {"error": ...} (os._exit at the end)."""

from __future__ import annotations

import json
import os
import sys

from rocketmq.client import Message, Producer


def main() -> None:
    namesrv, topic, access_key, secret_key = sys.argv[1:5]
    producer = Producer("AclProducer", timeout=3000)
    producer.set_namesrv_addr(namesrv)
    producer.set_session_credentials(access_key, secret_key, "ALIYUN")
    producer.start()
    msg = Message(topic)
    msg.set_body(b"signed")
    try:
        result = producer.send_sync(msg)
        print(json.dumps({"status": int(result.status)}), flush=True)
    except Exception as exc:  # the refusal surfaces as an exception from the client
        print(json.dumps({"error": str(exc)}), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
