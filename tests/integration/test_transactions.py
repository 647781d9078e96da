"""Transactions with raw protocol frames (the official Python package has no transactional
producer): half messages stay invisible until committed; rollback discards; an undecided
half is checked back with the producer; a late answer is honoured; repeats change nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from broker_core.model.message import decode_message_id, decode_record, encode_properties
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_broker

TOPIC = "TxTopic"
GROUP = "TxProducers"
COMMIT, ROLLBACK = 8, 12


def half(body: bytes, uniq: str) -> RemotingCommand:
    props = encode_properties(
        {"TRAN_MSG": "true", "PGROUP": GROUP, "UNIQ_KEY": uniq, "WAIT": "true"}
    ).decode()
    return RemotingCommand.request(
        RequestCode.SEND_MESSAGE,
        {
            "producerGroup": GROUP,
            "topic": TOPIC,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4",
            "queueId": "0",
            "sysFlag": "4",
            "bornTimestamp": "1",
            "flag": "0",
            "properties": props,
            "batch": "0",
        },
        body,
    )


def end(reply: RemotingCommand, decision: int, from_check: bool = False) -> RemotingCommand:
    _host, phys = decode_message_id(reply.ext_fields["msgId"])
    return RemotingCommand.request(
        RequestCode.END_TRANSACTION,
        {
            "producerGroup": GROUP,
            "tranStateTableOffset": reply.ext_fields["queueOffset"],
            "commitLogOffset": str(phys),
            "commitOrRollback": str(decision),
            "fromTransactionCheck": "1" if from_check else "0",
        },
    )


def visible(broker) -> list[bytes]:
    assert broker.store.wait_dispatched()
    result = broker.store.get_message(TOPIC, 0, 0, 32)
    return [decode_record(raw).body for raw in result.messages]


async def test_it_commits_rolls_back_checks_back_and_honours_a_late_answer(tmp_path: Path) -> None:
    async with run_broker(
        tmp_path / "store", transaction_time_out=200, transaction_check_interval=100
    ) as broker:
        from broker_core.model.topicconfig import TopicConfig

        broker.topics.update(TopicConfig(TOPIC, 1, 1))
        client = RemotingClient()
        checks: list[dict] = []
        answer_checks = {"now": True}

        async def on_check(request: RemotingCommand, conn) -> None:  # noqa: ANN001
            record = decode_record(request.body)
            checks.append({"topic": record.topic, "body": record.body, **request.ext_fields})
            if answer_checks["now"]:
                reply = RemotingCommand.request(
                    RequestCode.END_TRANSACTION,
                    {
                        "producerGroup": GROUP,
                        "tranStateTableOffset": request.ext_fields["tranStateTableOffset"],
                        "commitLogOffset": request.ext_fields["commitLogOffset"],
                        "commitOrRollback": str(COMMIT),
                        "fromTransactionCheck": "1",
                    },
                )
                conn.send(reply)
            return None

        client.register(RequestCode.CHECK_TRANSACTION_STATE, on_check)
        try:
            heartbeat = orjson.dumps({"clientID": "tx-client", "producerDataSet": [{"groupName": GROUP}]})
            assert (
                await client.invoke(
                    broker.address, RemotingCommand.request(RequestCode.HEART_BEAT, {}, heartbeat)
                )
            ).code == 0

            # Commit: invisible until END_TRANSACTION, then visible once.
            answer_checks["now"] = False
            first = await client.invoke(broker.address, half(b"committed", "U1"))
            assert first.code == ResponseCode.SUCCESS
            assert visible(broker) == []
            assert (await client.invoke(broker.address, end(first, COMMIT))).code == ResponseCode.SUCCESS
            assert visible(broker) == [b"committed"]
            # A repeated answer changes nothing.
            await client.invoke(broker.address, end(first, COMMIT))
            assert visible(broker) == [b"committed"]

            # Rollback: never visible, and a late commit cannot resurrect it.
            second = await client.invoke(broker.address, half(b"rolled back", "U2"))
            await client.invoke(broker.address, end(second, ROLLBACK))
            await client.invoke(broker.address, end(second, COMMIT))
            assert visible(broker) == [b"committed"]

            # Undecided: checked back with the producer, which then commits.
            answer_checks["now"] = True
            await client.invoke(broker.address, half(b"checked", "U3"))
            for _ in range(100):
                if b"checked" in visible(broker):
                    break
                await asyncio.sleep(0.05)
            assert visible(broker) == [b"committed", b"checked"]
            assert checks and checks[-1]["topic"] == TOPIC and checks[-1]["body"] == b"checked"
            assert checks[-1]["msgId"] == "U3"
            # The check-back names the half by its unique key and its offset message id.
            assert checks[-1]["transactionId"] == "U3" and checks[-1]["offsetMsgId"]

            # Late answer: the producer stays silent through a check, then decides.
            answer_checks["now"] = False
            fourth = await client.invoke(broker.address, half(b"late", "U4"))
            before = len(checks)
            for _ in range(100):
                if len(checks) > before:
                    break
                await asyncio.sleep(0.05)
            assert len(checks) > before, "no check-back arrived"
            assert visible(broker) == [b"committed", b"checked"]
            await client.invoke(broker.address, end(fourth, COMMIT, from_check=True))
            assert visible(broker) == [b"committed", b"checked", b"late"]
        finally:
            await client.close()


async def test_resolved_transactions_are_forgotten_once_their_halves_expire(tmp_path: Path) -> None:
    """The broker's memory of resolved transactions is bounded by the half queue's retention:
    when expiry deletes the segments holding the halves, they are forgotten (and an answer
    naming one finds no half message), while newer halves stay remembered."""
    from broker_core.model.message import MessageInner
    from broker_core.model.topicconfig import TopicConfig
    from broker_core.topics import RMQ_SYS_TRANS_HALF_TOPIC

    small = {"mapped_file_size_commit_log": 64 * 1024, "file_reserved_time": 1}
    async with run_broker(tmp_path / "store", store=small) as broker:
        broker.topics.update(TopicConfig(TOPIC, 1, 1))
        client = RemotingClient()
        try:
            old = [await client.invoke(broker.address, half(b"old", f"OLD{i}")) for i in range(3)]
            for reply in old:
                assert (await client.invoke(broker.address, end(reply, COMMIT))).code == ResponseCode.SUCCESS
            service = broker.transactions
            assert {f"OLD{i}" for i in range(3)} <= set(service.settled) and len(service.resolved) == 3
            # Fill three segments, so the halves' segment is no longer the newest.
            store = broker.store
            for _ in range(200):
                assert (await store.put_message_async(MessageInner(TOPIC, 0, b"x" * 1000, {}))).ok
            recent = await client.invoke(broker.address, half(b"recent", "RECENT"))
            await client.invoke(broker.address, end(recent, COMMIT))
            assert store.wait_dispatched()
            report = store.delete_expired_files(store.clock_ms() + 2 * 3_600_000, manual=True)
            assert report.commit_log_files_deleted >= 1
            assert store.get_min_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0) > 2
            service.prune()
            assert not {f"OLD{i}" for i in range(3)} & set(service.settled)
            assert "RECENT" in service.settled and len(service.resolved) == 1
            # The last half is still remembered: a repeated answer changes nothing.
            await client.invoke(broker.address, end(recent, COMMIT))
            assert store.wait_dispatched()
            tail = store.get_message(TOPIC, 0, store.get_max_offset_in_queue(TOPIC, 0) - 3, 32)
            assert [decode_record(raw).body for raw in tail.messages].count(b"recent") == 1
        finally:
            await client.close()
