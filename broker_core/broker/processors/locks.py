"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): queue locks for orderly consumers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from broker_core.broker.locks import QueueKey
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController


def _parse(request: RemotingCommand) -> tuple[str, str, list[QueueKey]]:
    body = orjson.loads(request.body)
    queues = [(str(mq["topic"]), str(mq["brokerName"]), int(mq["queueId"])) for mq in body.get("mqSet") or []]
    return str(body["consumerGroup"]), str(body["clientId"]), queues


class LockProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def lock(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        try:
            group, client_id, queues = _parse(request)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"malformed lock request: {exc!r}")
        locked = self.broker.locks.try_lock(group, queues, client_id)
        # queueId must be a JSON number: the C++ client reads it as one.
        body = {"lockOKMQSet": [{"topic": t, "brokerName": b, "queueId": q} for t, b, q in locked]}
        return request.response(body=orjson.dumps(body))

    def unlock(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        try:
            group, client_id, queues = _parse(request)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"malformed unlock request: {exc!r}")
        self.broker.locks.unlock(group, queues, client_id)
        return request.response()
