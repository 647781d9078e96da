"""Our transactional producer against a real nameserver and broker.

The broker checks undecided half messages back quickly here (transactionTimeOut 200 ms,
checked every 100 ms), so UNKNOW outcomes are resolved by the producer's checker within
the test.  What the application sees is read from the broker's store: a message is
visible when it is in its real topic's queue.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client.message import Message, SendStatus
from broker_core.client.producer.transaction import (
    LocalTransactionState,
    TransactionProducer,
    TransactionSendResult,
)
from broker_core.errors import ClientError, NoRouteError
from broker_core.model.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageExt,
    decode_record,
)
from broker_core.namesrv.server import NamesrvServer
from broker_core.testing import run_broker, run_namesrv
from broker_core.topics import RMQ_SYS_TRANS_HALF_TOPIC

from .clusterhelpers import started, wait_until_routed

TOPIC = "TxProducerTopic"
GROUP = "tx-producers"
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW


class Listener:
    """Answers by message body: ``local`` for the local transaction, ``checked`` on check-back.

    A ``local`` answer of None raises (a failing local transaction).
    """

    def __init__(
        self,
        local: dict[bytes, LocalTransactionState | None],
        checked: dict[bytes, LocalTransactionState],
    ) -> None:
        self.local = local
        self.checked = checked
        self.executed: list[tuple[bytes, Any]] = []
        self.checks: list[MessageExt] = []
        self.check_threads: set[str] = set()
        self.gate = threading.Event()  # check-backs are answered once it is set
        self.gate.set()
        self._lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        self.executed.append((msg.body, arg))
        state = self.local[msg.body]
        if state is None:
            raise RuntimeError("the local transaction failed")
        return state

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        with self._lock:
            self.checks.append(msg)
            self.check_threads.add(threading.current_thread().name)
        self.gate.wait(5)
        return self.checked.get(msg.body, UNKNOW)

    def checked_bodies(self) -> list[bytes]:
        with self._lock:
            return [m.body for m in self.checks]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[NamesrvServer, BrokerController]]:
    from broker_core.model.topicconfig import TopicConfig

    async with (
        run_namesrv() as ns,
        run_broker(
            tmp_path / "store", ns.address, transaction_time_out=200, transaction_check_interval=100
        ) as broker,
    ):
        broker.topics.update(TopicConfig(TOPIC, 1, 1, 6))
        broker.topics_changed()
        await wait_until_routed(ns, TOPIC)
        yield ns, broker


def visible(broker: BrokerController) -> list[MessageExt]:
    """The messages of TOPIC a consumer could read."""
    assert broker.store is not None and broker.store.wait_dispatched()
    return [decode_record(raw) for raw in broker.store.get_message(TOPIC, 0, 0, 64).messages]


def halves(broker: BrokerController) -> list[MessageExt]:
    assert broker.store is not None and broker.store.wait_dispatched()
    return [
        decode_record(raw) for raw in broker.store.get_message(RMQ_SYS_TRANS_HALF_TOPIC, 0, 0, 64).messages
    ]


async def eventually(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return True
        await asyncio.sleep(0.05)
    return condition()


async def test_commit_and_rollback_by_the_local_transaction(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    listener = Listener({b"commit": COMMIT, b"rollback": ROLLBACK}, {})
    producer = TransactionProducer(GROUP, ns.address, transaction_listener=listener)
    async with started(producer):
        msg = Message(TOPIC, b"commit", tags="TagA", keys="order-1", delay_level=3)
        committed = await asyncio.to_thread(producer.send_message_in_transaction, msg, "arg-1")
        rolled_back = await asyncio.to_thread(
            producer.send_message_in_transaction, Message(TOPIC, b"rollback"), "arg-2"
        )
        # Past the check-back time: a decided transaction is never checked back.
        await asyncio.sleep(0.6)

    assert isinstance(committed, TransactionSendResult)
    assert committed.status is SendStatus.SEND_OK and committed.local_transaction_state is COMMIT
    assert committed.transaction_id == committed.msg_id == msg.unique_id
    assert rolled_back.local_transaction_state is ROLLBACK
    assert listener.executed == [(b"commit", "arg-1"), (b"rollback", "arg-2")]
    assert listener.checks == []

    # The half messages went to the half topic, marked with the producer group.
    stored_halves = halves(broker)
    assert [h.body for h in stored_halves] == [b"commit", b"rollback"]
    assert all(h.properties["PGROUP"] == GROUP and h.properties["TRAN_MSG"] == "true" for h in stored_halves)
    assert stored_halves[0].queue_offset == committed.queue_offset
    assert stored_halves[0].msg_id == committed.offset_msg_id

    # Only the committed one is visible, at once (the delay level was dropped).
    (record,) = visible(broker)
    assert record.body == b"commit" and record.tags == "TagA" and record.keys == "order-1"
    assert record.uniq_key == committed.msg_id
    assert record.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE
    assert "DELAY" not in record.properties
    assert record.prepared_transaction_offset == stored_halves[0].commit_log_offset


async def test_undecided_and_failed_transactions_are_checked_back(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    listener = Listener(
        {b"unknown": UNKNOW, b"raises": None, b"checked-rollback": UNKNOW},
        {b"unknown": COMMIT, b"raises": COMMIT, b"checked-rollback": ROLLBACK},
    )
    listener.gate.clear()  # nothing is decided until the invisibility is asserted
    producer = TransactionProducer(GROUP, ns.address, transaction_listener=listener)
    async with started(producer):
        results = [
            await asyncio.to_thread(producer.send_message_in_transaction, Message(TOPIC, body))
            for body in (b"unknown", b"raises", b"checked-rollback")
        ]
        assert [r.local_transaction_state for r in results] == [UNKNOW, UNKNOW, UNKNOW]
        assert visible(broker) == []  # undecided: invisible until the checker answers
        listener.gate.set()

        def all_checked() -> bool:
            return {b"unknown", b"raises", b"checked-rollback"} <= set(listener.checked_bodies())

        assert await eventually(all_checked), listener.checked_bodies()
        assert await eventually(lambda: len(visible(broker)) == 2)
        await asyncio.sleep(0.3)  # answers to checks sent meanwhile arrive
        resolved = len(listener.checked_bodies())
        await asyncio.sleep(0.5)  # resolved: no more check-backs, and the rollback stays out
        assert len(listener.checked_bodies()) == resolved

    assert sorted(m.body for m in visible(broker)) == [b"raises", b"unknown"]
    # The checker saw the message as sent, in its real topic, on the callback threads.
    first = next(m for m in listener.checks if m.body == b"unknown")
    assert first.topic == TOPIC and first.uniq_key == results[0].msg_id
    assert first.properties["PGROUP"] == GROUP
    assert all(name.startswith("quiver-callback-") for name in listener.check_threads)


async def test_a_send_that_fails_runs_no_local_transaction(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, _broker = cluster
    listener = Listener({}, {})
    async with started(TransactionProducer(GROUP, ns.address, transaction_listener=listener)) as producer:
        with pytest.raises(NoRouteError):
            await asyncio.to_thread(producer.send_message_in_transaction, Message("NoSuchTopic", b"x"))
    assert listener.executed == []
    async with started(TransactionProducer(GROUP, ns.address)) as bare:
        with pytest.raises(ClientError, match="no transaction listener"):
            await asyncio.to_thread(bare.send_message_in_transaction, Message(TOPIC, b"x"))
