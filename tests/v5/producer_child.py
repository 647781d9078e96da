"""Run by the v5 tests in the v5 client's own environment (``.venv-v5``, where the official
``rocketmq-python-client`` is installed: its top-level package ``rocketmq`` is also the 4.x
client's name).  Sends through the proxy and prints one JSON line per send.

Arguments: endpoints, topic, count; credentials from V5_ACCESS_KEY / V5_SECRET_KEY.
Normal messages (tag, two keys, a property), then FIFO
messages of two message groups, then one timer message (which the proxy may refuse).
"""

from __future__ import annotations

import json
import os
import sys
import time

from rocketmq import ClientConfiguration, Credentials, Message, Producer


def message(topic: str, body: str, **extra: str) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body.encode()
    msg.tag = extra.pop("tag", "TagA")
    msg.keys = extra.pop("keys", f"key-{body}")
    group = extra.pop("group", "")
    if group:
        msg.message_group = group
    delay = extra.pop("delay_ms", "")
    if delay:
        msg.delivery_timestamp = int(time.time() * 1000) + int(delay)
    for key, value in extra.items():
        msg.add_property(key, value)
    return msg


def main() -> None:
    endpoints, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    credentials = Credentials(os.environ.get("V5_ACCESS_KEY", ""), os.environ.get("V5_SECRET_KEY", ""))
    producer = Producer(ClientConfiguration(endpoints, credentials), (topic,))
    try:
        producer.startup()
    except Exception as exc:  # noqa: BLE001 - the test reads what happened
        print(json.dumps({"kind": "startup", "error": str(exc)}), flush=True)
        os._exit(0)
    try:
        plan = [("normal", message(topic, f"v5-{i}", origin="v5", index=str(i))) for i in range(count)]
        plan += [
            ("fifo", message(topic, f"fifo-{g}-{i}", group=f"group-{g}", origin="v5", index=str(i)))
            for i in range(count)
            for g in ("a", "b")
        ]
        plan.append(("timer", message(topic, "timer-0", delay_ms="2000", origin="v5")))
        for kind, msg in plan:
            try:
                receipt = producer.send(msg)
            except Exception as exc:  # noqa: BLE001 - the test reads what happened
                print(json.dumps({"kind": kind, "error": str(exc)}), flush=True)
                continue
            print(
                json.dumps({"kind": kind, "message_id": receipt.message_id, "offset": receipt.offset}),
                flush=True,
            )
    finally:
        producer.shutdown()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
