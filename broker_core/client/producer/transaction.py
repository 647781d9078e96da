"""The transactional producer: RocketMQ's ``TransactionMQProducer`` behaviour in Python.

``send_message_in_transaction`` sends a half message (property TRAN_MSG, sysFlag
PREPARED), which the broker keeps invisible; when the broker stored it, the application's
local transaction runs (``TransactionListener.execute_local_transaction``), and its
outcome goes to the broker as END_TRANSACTION: commit makes the message visible in its
topic, rollback discards it, UNKNOW (also what an exception in the local transaction
means) leaves it for the broker to check back later.  A half message that was not stored
cleanly (flush or slave trouble) is rolled back without running the local transaction.

A broker checks an undecided half message back with a producer of its group
(CHECK_TRANSACTION_STATE): the client instance hands the request to the producer named
by the message's PGROUP property, whose listener (``check_local_transaction``) answers on
the instance's callback threads, never on its event loop, and the answer goes back to
that broker as END_TRANSACTION marked fromTransactionCheck.

END_TRANSACTION is oneway, as in RocketMQ: a lost answer is repaired by the check-back.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from broker_core.client.config import ClientConfig
from broker_core.client.message import Message, SendResult, SendStatus
from broker_core.client.producer.producer import Producer
from broker_core.errors import ClientError
from broker_core.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageExt,
    decode_message_id,
)
from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.errors import RemotingError
from broker_core.remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

log = logging.getLogger(__name__)


class LocalTransactionState(enum.Enum):
    """What the application decided about its local transaction (RocketMQ's names)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # sic: RocketMQ's spelling, so users find the name they know

    @property
    def commit_or_rollback(self) -> int:
        """The END_TRANSACTION header value: the transaction type of the sysFlag."""
        return _COMMIT_OR_ROLLBACK[self]


_COMMIT_OR_ROLLBACK = {
    LocalTransactionState.COMMIT_MESSAGE: TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: TRANSACTION_NOT_TYPE,
}


class TransactionListener(Protocol):
    """The application's side of a transaction (RocketMQ ``TransactionListener``)."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        """Run the local transaction once the half message is stored; its outcome.

        Runs on the thread that called ``send_message_in_transaction``.  An exception or
        a None counts as UNKNOW: the broker will ask ``check_local_transaction`` later.
        """
        ...

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        """The outcome of the transaction behind half message ``msg``, when a broker asks.

        Runs on the client's callback threads; may be called more than once for one
        message, and after ``execute_local_transaction`` answered.  An exception counts
        as UNKNOW (the broker asks again, up to its transactionCheckMax).
        """
        ...


@dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    """A send result with what became of the transaction (RocketMQ ``TransactionSendResult``)."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW
    transaction_id: str | None = None


class TransactionProducer(Producer):
    """A producer whose messages are committed or rolled back by a local transaction.

    The group matters more than for a plain producer: the broker checks undecided half
    messages back with a running producer of the same group, possibly another process.
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str = "",
        *,
        transaction_listener: TransactionListener | None = None,
        config: ClientConfig | None = None,
        **options: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, config=config, **options)
        self.transaction_listener = transaction_listener

    # -- sending -----------------------------------------------------------------------------

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, and end it on the broker.

        Raises what ``send`` raises when the half message cannot be sent (nothing was
        stored then, and the local transaction did not run).  A failure to deliver the
        decision is only logged: the broker checks the message back.
        """
        listener = self.transaction_listener
        if listener is None:
            raise ClientError(f"transactional producer {self.group!r} has no transaction listener")
        # A delay level is ignored, as in RocketMQ: the half message must not be scheduled.
        msg.delay_level = 0
        msg.properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        msg.properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        msg.properties[PROPERTY_PRODUCER_GROUP] = self.group
        result = self.send(msg)
        transaction_id = msg.unique_id
        state = LocalTransactionState.UNKNOW
        error: BaseException | None = None
        if result.status is SendStatus.SEND_OK:
            try:
                state = listener.execute_local_transaction(msg, arg) or LocalTransactionState.UNKNOW
            except Exception as exc:  # the application's failure: let the check-back decide
                log.exception("local transaction of %s (topic %s) failed", transaction_id, msg.topic)
                error = exc
            if state is not LocalTransactionState.COMMIT_MESSAGE:
                log.info("local transaction of %s (topic %s): %s", transaction_id, msg.topic, state.name)
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        remark = f"executeLocalTransactionBranch exception: {error!r}" if error is not None else None
        try:
            self.instance.call(self._end_transaction(msg, result, state, transaction_id, remark))
        except (ClientError, RemotingError) as exc:
            log.warning(
                "local transaction of %s is %s, but ending it on the broker failed: %s",
                transaction_id,
                state.name,
                exc,
            )
        return TransactionSendResult(
            result.status,
            result.msg_id,
            result.offset_msg_id,
            result.queue,
            result.queue_offset,
            result.region_id,
            result.trace_on,
            local_transaction_state=state,
            transaction_id=transaction_id,
        )

    async def _end_transaction(
        self,
        msg: Message,
        result: SendResult,
        state: LocalTransactionState,
        transaction_id: str | None,
        remark: str | None,
    ) -> None:
        """END_TRANSACTION, oneway, to the master of the broker that stored the half message."""
        _host, commit_log_offset = decode_message_id(result.offset_msg_id or result.msg_id)
        addr = await self._master(result.queue.broker_name, msg.topic)
        request = _end_request(
            group=self.group,
            topic=msg.topic,
            broker_name=result.queue.broker_name,
            half_queue_offset=result.queue_offset,
            commit_log_offset=commit_log_offset,
            state=state,
            from_check=False,
            msg_id=result.msg_id,
            transaction_id=transaction_id,
            remark=remark,
        )
        await self.instance.invoke_oneway(addr, request)

    # -- check-back --------------------------------------------------------------------------

    def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        """A broker asks about half message ``msg`` (CHECK_TRANSACTION_STATE ``header``).

        Called on the instance's loop: the listener runs on the callback threads, and the
        answer goes back to ``broker_addr``, the broker that asked.
        """
        self.instance.run_callback(self._check, broker_addr, msg, header)

    def _check(self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        listener = self.transaction_listener
        if listener is None:
            log.warning("check-back for %s from %s: no transaction listener", self.group, broker_addr)
            return
        state = LocalTransactionState.UNKNOW
        remark = None
        try:
            state = listener.check_local_transaction(msg) or LocalTransactionState.UNKNOW
        except Exception as exc:  # the application's failure: the broker asks again later
            log.exception("checking the local transaction of %s failed", msg.uniq_key or msg.msg_id)
            remark = f"checkLocalTransactionState Exception: {exc!r}"
        if state is not LocalTransactionState.COMMIT_MESSAGE:
            log.info("check-back of %s from %s: %s", msg.uniq_key or msg.msg_id, broker_addr, state.name)
        try:
            request = _end_request(
                group=self.group,
                topic=header.topic or msg.topic,
                broker_name=header.broker_name,
                half_queue_offset=(
                    msg.queue_offset
                    if header.tran_state_table_offset is None
                    else header.tran_state_table_offset
                ),
                commit_log_offset=(
                    msg.commit_log_offset if header.commit_log_offset is None else header.commit_log_offset
                ),
                state=state,
                from_check=True,
                msg_id=msg.uniq_key or msg.msg_id,
                transaction_id=header.transaction_id or msg.uniq_key,
                remark=remark,
            )
            self.instance.call(self.instance.invoke_oneway(broker_addr, request))
        except (ClientError, RemotingError, ValueError) as exc:
            log.warning("answering the check-back of %s to %s failed: %s", msg.uniq_key, broker_addr, exc)


def _end_request(
    *,
    group: str,
    topic: str,
    broker_name: str | None,
    half_queue_offset: int,
    commit_log_offset: int,
    state: LocalTransactionState,
    from_check: bool,
    msg_id: str,
    transaction_id: str | None,
    remark: str | None,
) -> RemotingCommand:
    """END_TRANSACTION (37) with RocketMQ's EndTransactionRequestHeader fields, oneway."""
    header = EndTransactionRequestHeader(
        group,
        half_queue_offset,
        commit_log_offset,
        state.commit_or_rollback,
        from_check,
        msg_id,
        topic,
        transaction_id or None,
        broker_name or None,
    )
    request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_fields(), oneway=True)
    request.remark = remark
    return request


__all__ = [
    "LocalTransactionState",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
]
