"""Run by the v5 tests in ``.venv-v5``: the official Python client's transactional producer
through the proxy, printing one JSON line per event.

Arguments: endpoints, topic, seconds to stay up answering check-backs.  Sends four
transactional messages: ``tx-commit`` (committed), ``tx-rollback`` (rolled back), and
``check-commit`` / ``check-rollback``, left open so that the broker's check-back decides
them through this producer's TransactionChecker (COMMIT / ROLLBACK by body).
"""

from __future__ import annotations

import json
import os
import sys
import time

from rocketmq import (
    ClientConfiguration,
    Credentials,
    Message,
    Producer,
    TransactionChecker,
    TransactionResolution,
)


def emit(**line: object) -> None:
    print(json.dumps(line), flush=True)


class Checker(TransactionChecker):
    def check(self, message: Message) -> TransactionResolution:
        body = message.body.decode()
        emit(event="check", body=body, message_id=message.message_id)
        return TransactionResolution.COMMIT if body == "check-commit" else TransactionResolution.ROLLBACK


def main() -> None:
    endpoints, topic, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    producer = Producer(ClientConfiguration(endpoints, Credentials()), (topic,), Checker())
    producer.startup()
    try:
        for body, end in (
            ("tx-commit", "commit"),
            ("tx-rollback", "rollback"),
            ("check-commit", None),
            ("check-rollback", None),
        ):
            msg = Message()
            msg.topic = topic
            msg.body = body.encode()
            msg.tag = "Tx"
            transaction = producer.begin_transaction()
            try:
                receipt = producer.send(msg, transaction)
            except Exception as exc:  # noqa: BLE001 - the test reads what happened
                emit(event="error", body=body, error=str(exc))
                continue
            emit(event="sent", body=body, message_id=receipt.message_id)
            if end == "commit":
                transaction.commit()
            elif end == "rollback":
                transaction.rollback()
            if end:
                emit(event=end, body=body)
        time.sleep(seconds)
    finally:
        producer.shutdown()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
