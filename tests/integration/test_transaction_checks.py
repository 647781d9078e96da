"""Check-back as RocketMQ 4.9 does it, on a broker whose clock the test moves.

An undecided half message is stored again for each check with ``TRANSACTION_CHECK_TIMES``
one higher, and the producer is asked about that copy; the count lives in the message, so
it goes on after a restart, and past ``transactionCheckMax`` the message is given up into
TRANS_CHECK_MAX_TIME_TOPIC.  ``CHECK_IMMUNITY_TIME_IN_SECONDS`` holds the first check back
for that long.  A commit stores the message with the properties RocketMQ's record has.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from broker_core.broker.controller import BrokerController
from broker_core.config import BrokerConfig
from broker_core.model.message import MessageExt, decode_record, encode_properties
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import small_store_config
from broker_core.topics import TRANS_CHECK_MAX_TIME_TOPIC

TOPIC = "TxChecked"
GROUP = "TxCheckedProducers"
COMMIT = 8
T0 = 1_700_000_000_000


def half(body: bytes, uniq: str, **extra: str) -> RemotingCommand:
    props = {"TRAN_MSG": "true", "PGROUP": GROUP, "UNIQ_KEY": uniq, "WAIT": "true", **extra}
    fields = {
        "producerGroup": GROUP,
        "topic": TOPIC,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "4",
        "bornTimestamp": str(T0),
        "flag": "0",
        "properties": encode_properties(props).decode(),
        "batch": "0",
    }
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, body)


class Producer:
    """A producer of GROUP over raw frames that records the check-backs it is sent."""

    def __init__(self) -> None:
        self.client = RemotingClient()
        self.checks: list[tuple[MessageExt, dict[str, str]]] = []
        self.client.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)

    async def _on_check(self, request: RemotingCommand, conn: Any) -> None:
        self.checks.append((decode_record(request.body), dict(request.ext_fields)))

    async def join(self, broker: BrokerController) -> None:
        body = orjson.dumps({"clientID": "tx-checked", "producerDataSet": [{"groupName": GROUP}]})
        answer = await self.client.invoke(
            broker.address, RemotingCommand.request(RequestCode.HEART_BEAT, {}, body)
        )
        assert answer.code == ResponseCode.SUCCESS

    async def round(self, broker: BrokerController, expected: int) -> dict[str, MessageExt]:
        """Run one check round; the check-backs it sent, by the message's unique key."""
        before = len(self.checks)
        assert await broker.transactions.check_once() == expected
        async with asyncio.timeout(10):
            while len(self.checks) < before + expected:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert len(self.checks) == before + expected
        return {msg.properties["UNIQ_KEY"]: msg for msg, _ in self.checks[before:]}


async def started(store: Path, clock: list[int]) -> BrokerController:
    config = BrokerConfig(
        broker_ip1="127.0.0.1",
        listen_port=0,
        transaction_time_out=6_000,
        transaction_check_interval=3_600_000,  # rounds run when the test says
        transaction_check_max=3,
    )
    broker = BrokerController(config, small_store_config(store), clock_ms=lambda: clock[0])
    await broker.start()
    broker.topics.update(TopicConfig(TOPIC, 1, 1))
    return broker


def stored(broker: BrokerController, topic: str) -> list[MessageExt]:
    assert broker.store is not None and broker.store.wait_dispatched()
    return [decode_record(raw) for raw in broker.store.get_message(topic, 0, 0, 32).messages]


async def test_checks_count_in_the_message_honour_immunity_survive_a_restart_and_give_up(
    tmp_path: Path,
) -> None:
    clock = [T0]
    broker = await started(tmp_path / "store", clock)
    producer = Producer()
    try:
        await producer.join(broker)
        for request in (half(b"plain", "A"), half(b"immune", "B", CHECK_IMMUNITY_TIME_IN_SECONDS="20")):
            assert (await producer.client.invoke(broker.address, request)).code == ResponseCode.SUCCESS

        clock[0] = T0 + 3_000  # younger than transactionTimeOut: nothing yet
        await producer.round(broker, 0)
        clock[0] = T0 + 7_000  # A is due; B is immune for 20 s
        checked = await producer.round(broker, 1)
        assert checked["A"].properties["TRANSACTION_CHECK_TIMES"] == "1"
        assert checked["A"].topic == TOPIC  # the check shows the real topic
        clock[0] = T0 + 21_000
        checked = await producer.round(broker, 2)
        assert checked["A"].properties["TRANSACTION_CHECK_TIMES"] == "2"
        assert checked["B"].properties["TRANSACTION_CHECK_TIMES"] == "1"
        rows, total = broker.transactions.pending()
        assert total == 2 and {r["uniqKey"]: r["checkBacks"] for r in rows} == {"A": 2, "B": 1}
    finally:
        await producer.client.close()
        await broker.close()

    # The counts are in the messages: they go on after a restart.
    clock[0] = T0 + 30_000
    broker = await started(tmp_path / "store", clock)
    producer = Producer()
    try:
        await producer.join(broker)
        checked = await producer.round(broker, 2)
        assert checked["A"].properties["TRANSACTION_CHECK_TIMES"] == "3"
        assert checked["B"].properties["TRANSACTION_CHECK_TIMES"] == "2"

        # A has had transactionCheckMax (3) checks: given up, kept for an operator.
        clock[0] = T0 + 40_000
        checked = await producer.round(broker, 1)
        assert set(checked) == {"B"} and checked["B"].properties["TRANSACTION_CHECK_TIMES"] == "3"
        [kept] = stored(broker, TRANS_CHECK_MAX_TIME_TOPIC)
        assert kept.body == b"plain" and kept.properties["TRANSACTION_CHECK_TIMES"] == "3"

        # The producer commits B by the copy its last check named.
        _msg, fields = producer.checks[-1]
        commit = RemotingCommand.request(
            RequestCode.END_TRANSACTION,
            {
                "producerGroup": GROUP,
                "tranStateTableOffset": fields["tranStateTableOffset"],
                "commitLogOffset": fields["commitLogOffset"],
                "commitOrRollback": str(COMMIT),
                "fromTransactionCheck": "1",
            },
        )
        assert (await producer.client.invoke(broker.address, commit)).code == ResponseCode.SUCCESS
        [committed] = stored(broker, TOPIC)
        assert committed.body == b"immune"
        # As RocketMQ's record has it: every property of the half message kept.
        props = committed.properties
        assert props["TRAN_MSG"] == "true" and props["PGROUP"] == GROUP
        assert props["REAL_TOPIC"] == TOPIC and props["REAL_QID"] == "0"
        assert props["TRANSACTION_CHECK_TIMES"] == "3" and props["UNIQ_KEY"] == "B"

        clock[0] = T0 + 50_000
        await producer.round(broker, 0)  # nothing left to check
        assert broker.transactions.pending() == ([], 0)
    finally:
        await producer.client.close()
        await broker.close()
