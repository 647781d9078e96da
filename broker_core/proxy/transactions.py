"""Transactional messages for RocketMQ 5 clients: half sends, EndTransaction, check-back.

- A TRANSACTION message is sent as a half message (sysFlag PREPARED, ``TRAN_MSG=true``,
  PGROUP the proxy's producer group); the send's answer carries a transaction id that
  names where the half is: ``"<broker name> <commit-log offset> <queue offset>"``.
- EndTransaction (COMMIT or ROLLBACK, from the client itself or answering a check) becomes
  END_TRANSACTION, oneway as RocketMQ's, to the master of that broker.
- A broker's CHECK_TRANSACTION_STATE for a half message of the proxy's producer group comes
  in on the proxy's connection; the proxy hands it to a producer publishing the message's
  topic as a RecoverOrphanedTransactionCommand over that producer's Telemetry stream, and
  the producer answers with EndTransaction (source SERVER_CHECK).  With no such producer
  connected the check is dropped: the broker asks again on its next round.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass
from typing import Any

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from broker_core.model.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    RecordFormatError,
    decode_message_id,
    decode_record,
)
from broker_core.proxy.clients import PROXY_PRODUCER_GROUP, ClientRegistry
from broker_core.proxy.consumption import Route
from broker_core.proxy.convert import status, v2_message
from broker_core.proxy.stubs import load
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

log = logging.getLogger(__name__)

pb, svc, _grpc = load()


@dataclass(frozen=True, slots=True)
class TransactionId:
    """Where a half message is: its broker, commit-log offset and queue offset."""

    broker_name: str
    commit_log_offset: int
    queue_offset: int

    def encode(self) -> str:
        return f"{self.broker_name} {self.commit_log_offset} {self.queue_offset}"

    @classmethod
    def decode(cls, text: str) -> TransactionId:
        parts = text.split(" ")
        if len(parts) != 3 or not parts[0] or not parts[1].isdigit() or not parts[2].isdigit():
            raise ValueError(f"not a transaction id of this proxy: {text!r}")
        return cls(parts[0], int(parts[1]), int(parts[2]))

    @classmethod
    def of_send(cls, broker_name: str, offset_msg_id: str, queue_offset: int) -> TransactionId:
        _host, commit_log_offset = decode_message_id(offset_msg_id)
        return cls(broker_name, commit_log_offset, queue_offset)


class Transactions:
    """EndTransaction and the brokers' check-backs, for one proxy."""

    def __init__(self, route: Route, registry: ClientRegistry) -> None:
        self._route = route
        self._registry = registry

    # -- EndTransaction ---------------------------------------------------------------------------

    async def end(self, request: Any, client: AdminClient) -> Any:
        try:
            where = TransactionId.decode(request.transaction_id)
        except ValueError as exc:
            return svc.EndTransactionResponse(status=status(pb.INVALID_TRANSACTION_ID, str(exc)))
        if request.resolution == pb.COMMIT:
            decision = TRANSACTION_COMMIT_TYPE
        elif request.resolution == pb.ROLLBACK:
            decision = TRANSACTION_ROLLBACK_TYPE
        else:
            return svc.EndTransactionResponse(
                status=status(pb.BAD_REQUEST, "resolution must be COMMIT or ROLLBACK")
            )
        topic = request.topic.name
        try:
            masters = (await self._route(topic)).master_addrs()
        except AdminError as exc:
            code = (
                pb.TOPIC_NOT_FOUND if exc.code == ResponseCode.TOPIC_NOT_EXIST else pb.INTERNAL_SERVER_ERROR
            )
            return svc.EndTransactionResponse(status=status(code, str(exc)))
        addr = masters.get(where.broker_name)
        if addr is None:
            return svc.EndTransactionResponse(
                status=status(
                    pb.INVALID_TRANSACTION_ID, f"broker {where.broker_name!r} has no master for {topic!r}"
                )
            )
        header = EndTransactionRequestHeader(
            PROXY_PRODUCER_GROUP,
            where.queue_offset,
            where.commit_log_offset,
            decision,
            request.source == pb.SOURCE_SERVER_CHECK,
            request.message_id,
            topic,
            request.message_id or None,
            where.broker_name,
        )
        # Not oneway (as RocketMQ's clients send it): Quiver's broker answers, so a half
        # message that is not there (already ended, or a wrong id) is said so.
        end = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_fields())
        try:
            response = await client.requests.raw(addr, end)
        except AdminError as exc:
            return svc.EndTransactionResponse(status=status(pb.PROXY_TIMEOUT, str(exc)))
        if response.code != ResponseCode.SUCCESS:
            return svc.EndTransactionResponse(
                status=status(pb.INVALID_TRANSACTION_ID, response.remark or f"refused ({response.code})")
            )
        return svc.EndTransactionResponse(status=status(pb.OK))

    # -- check-back -----------------------------------------------------------------------------

    def on_check(self, request: RemotingCommand, conn: Any) -> None:
        """CHECK_TRANSACTION_STATE from a broker (oneway; on the proxy's loop)."""
        asyncio.get_running_loop().create_task(self._relay(request, str(getattr(conn, "remote_address", ""))))

    async def _relay(self, request: RemotingCommand, broker_addr: str) -> None:
        try:
            header = CheckTransactionStateRequestHeader.from_fields(request.ext_fields)
            half = decode_record(request.body)
            half.body = half.uncompressed_body()
        except (RecordFormatError, ValueError, zlib.error) as exc:
            log.warning("ignoring a malformed transaction check from %s: %s", broker_addr, exc)
            return
        topic = half.properties.get("REAL_TOPIC") or half.topic
        session = self._registry.producer_session(topic)
        if session is None:
            log.info("transaction check for %s (%s): no v5 producer of it is connected", topic, half.msg_id)
            return
        try:
            broker_name = header.broker_name or await self._registry.broker_name_of(broker_addr)
        except AdminError as exc:
            log.warning("transaction check from %s: cannot name the broker: %s", broker_addr, exc)
            return
        if broker_name is None:
            log.warning("transaction check from %s: not a master of this cluster", broker_addr)
            return
        where = TransactionId(
            broker_name,
            half.commit_log_offset if header.commit_log_offset is None else header.commit_log_offset,
            half.queue_offset if header.tran_state_table_offset is None else header.tran_state_table_offset,
        )
        half.topic = topic
        message = v2_message(half, "", "", 0)
        session.push(
            svc.TelemetryCommand(
                status=status(pb.OK),
                recover_orphaned_transaction_command=svc.RecoverOrphanedTransactionCommand(
                    message=message, transaction_id=where.encode()
                ),
            )
        )
