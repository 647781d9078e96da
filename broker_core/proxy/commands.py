"""What a broker asks of a RocketMQ 5 client, answered through the proxy.

The console asks a consumer for its running info (GET_CONSUMER_RUNNING_INFO) and to
consume one message on the spot (CONSUME_MESSAGE_DIRECTLY); the broker relays both to the
connection the client registered on, which for a v5 client is the proxy's.

- Running info: the proxy answers for the client with what it knows of it (RocketMQ's
  ``ConsumerRunningInfo`` shape): its language, SDK version, protocol, address, client type
  and subscriptions.
- Consume directly: the proxy sends the client a VerifyMessageCommand over its Telemetry
  stream and waits up to ``VERIFY_TIMEOUT_S`` for its VerifyMessageResult; a client that does
  not answer (``rocketmq-python-client`` 5.1.2 and the Node.js client 1.0.8 implement no
  such command) is reported as such, at once after the wait, rather than left hanging.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import orjson

from broker_core.model.message import RecordFormatError, decode_record
from broker_core.proxy.clients import PROTOCOL, ClientRegistry
from broker_core.proxy.convert import v2_message
from broker_core.proxy.stubs import load
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand

log = logging.getLogger(__name__)

pb, svc, _grpc = load()

VERIFY_TIMEOUT_S = 5.0


class ClientCommands:
    def __init__(self, registry: ClientRegistry) -> None:
        self.registry = registry
        self._waiting: dict[str, asyncio.Future[Any]] = {}

    # -- from the client ------------------------------------------------------------------------

    def on_result(self, command: Any) -> bool:
        """A client's answer on its Telemetry stream; True when it was one awaited here."""
        if not command.HasField("verify_message_result"):
            return False
        future = self._waiting.get(command.verify_message_result.nonce)
        if future is not None and not future.done():
            future.set_result(command)
        return True

    # -- from the brokers -------------------------------------------------------------------------

    def running_info(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        client_id = request.ext_fields.get("clientId", "")
        client = self.registry.clients.get(client_id)
        if client is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the proxy serves no client {client_id!r}")
        body = {
            "properties": {
                "clientLanguage": client.language,
                "clientVersion": client.version,
                "protocol": PROTOCOL,
                "clientAddr": client.addr,
                "clientType": pb.ClientType.Name(client.client_type),
                "consumeType": "CONSUME_POP",
                "telemetryStreams": len(client.sessions),
                "answeredBy": "the gRPC proxy, for its RocketMQ 5 client",
            },
            "subscriptionSet": [
                {"topic": topic, "subString": expression, "expressionType": kind, "subVersion": 0}
                for topic, (expression, kind) in sorted(client.subscriptions.items())
            ],
            "mqTable": {},
            "statusTable": {},
        }
        return request.response(body=orjson.dumps(body))

    async def consume_directly(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        client_id = request.ext_fields.get("clientId", "")
        client = self.registry.clients.get(client_id)
        if client is None or not client.sessions:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"the proxy has no open stream to client {client_id!r}"
            )
        try:
            stored = decode_record(request.body)
            stored.body = stored.uncompressed_body()
        except (RecordFormatError, ValueError) as exc:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"the message to verify does not decode: {exc}"
            )
        nonce = uuid.uuid4().hex
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[nonce] = future
        started = time.monotonic()
        client.sessions[-1].push(
            svc.TelemetryCommand(
                status=pb.Status(code=pb.OK, message="OK"),
                verify_message_command=svc.VerifyMessageCommand(
                    nonce=nonce, message=v2_message(stored, "", "", 0)
                ),
            )
        )
        try:
            answer = await asyncio.wait_for(future, VERIFY_TIMEOUT_S)
        except TimeoutError:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"RocketMQ 5 client {client_id} ({client.language} {client.version}) did not answer the "
                f"VerifyMessageCommand within {VERIFY_TIMEOUT_S:.0f} s: its SDK may not implement it",
            )
        finally:
            self._waiting.pop(nonce, None)
        ok = answer.status.code == pb.OK
        result = {
            "order": False,
            "autoCommit": True,
            "consumeResult": "CR_SUCCESS" if ok else "CR_THROW_EXCEPTION",
            "remark": answer.status.message,
            "spentTimeMills": int((time.monotonic() - started) * 1000),
        }
        return request.response(body=orjson.dumps(result))
