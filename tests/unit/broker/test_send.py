"""SendProcessor.handle: answered inline under ASYNC_FLUSH, after the disk under SYNC_FLUSH;
compressed batches."""

from __future__ import annotations

import inspect
import zlib
from collections.abc import Awaitable
from pathlib import Path

import pytest

from broker_core.broker.processors.send import SendError, SendProcessor, parse_send_header
from broker_core.model.message import COMPRESSED_FLAG, decode_record, encode_batch, encode_properties
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.connection import Connection
from broker_core.testing import run_broker

TOPIC = "SendTopic"


PEER = "127.0.0.1:50123"


def PeerConnection() -> Connection:  # noqa: N802 - reads as the connection it returns
    """A connection not attached to a socket: the processor reads only the producer's address."""
    conn = Connection()
    conn.remote_address = PEER
    return conn


async def answered(answer: RemotingCommand | Awaitable[RemotingCommand]) -> RemotingCommand:
    return answer if isinstance(answer, RemotingCommand) else await answer


def send_request(body: bytes = b"hello", queue_id: int = 1, topic: str = TOPIC) -> RemotingCommand:
    """SEND_MESSAGE as the C++ client sends it (V1 field names)."""
    fields = {
        "producerGroup": "g",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": str(queue_id),
        "sysFlag": "0",
        "bornTimestamp": "1700000000000",
        "flag": "0",
        "properties": encode_properties({"TAGS": "TagA", "UNIQ_KEY": "AB" * 16, "WAIT": "true"}).decode(),
        "reconsumeTimes": "0",
        "batch": "0",
    }
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, body)


async def test_an_async_flush_send_is_answered_inline_with_where_it_went(tmp_path: Path) -> None:
    async with run_broker(tmp_path) as broker:
        broker.topics.update(TopicConfig(TOPIC, 4, 4, 6))
        answer = SendProcessor(broker).handle(send_request(), PeerConnection())
        assert type(answer) is RemotingCommand  # no awaitable: the server needs no task
        assert answer.code == ResponseCode.SUCCESS
        assert answer.ext_fields["queueId"] == "1" and answer.ext_fields["queueOffset"] == "0"
        assert broker.store is not None and broker.store.wait_dispatched()
        (record,) = broker.store.get_message(TOPIC, 1, 0, 32).messages
        stored = decode_record(record)
        assert stored.body == b"hello" and stored.born_host == PEER
        assert answer.ext_fields["msgId"] == stored.msg_id


async def test_a_refused_send_is_answered_inline(tmp_path: Path) -> None:
    async with run_broker(tmp_path) as broker:
        answer = SendProcessor(broker).handle(send_request(topic="NoSuchTopic"), PeerConnection())
        assert type(answer) is RemotingCommand
        assert answer.code == ResponseCode.TOPIC_NOT_EXIST
        assert answer.ext_fields == {}


async def test_a_sync_flush_send_is_answered_once_it_is_on_disk(tmp_path: Path) -> None:
    async with run_broker(tmp_path, store={"flush_disk_type": "SYNC_FLUSH"}) as broker:
        broker.topics.update(TopicConfig(TOPIC, 4, 4, 6))
        store = broker.store
        assert store is not None
        answer = SendProcessor(broker).handle(send_request(), PeerConnection())
        assert inspect.isawaitable(answer)
        response = await answer
        assert response.code == ResponseCode.SUCCESS
        assert store.flush_service.flushed_offset >= store.commit_log.records_end


def batch_request(body: bytes, sys_flag: int) -> RemotingCommand:
    """A batch as the C++ client sends it: code 10, batch=1, WAIT in the header properties."""
    request = send_request(body, queue_id=2)
    request.ext_fields.update(
        {"batch": "1", "sysFlag": str(sys_flag), "properties": encode_properties({"WAIT": "true"}).decode()}
    )
    return request


def batch_items(count: int) -> list[tuple[bytes, dict[str, str], int]]:
    return [(b"%04d" % i * 256, {"TAGS": "TagA", "UNIQ_KEY": f"{i:032X}"}, 0) for i in range(count)]


async def test_a_batch_the_client_compressed_is_stored_item_by_item_uncompressed(tmp_path: Path) -> None:
    items = batch_items(8)  # 8 KiB of bodies: the C++ client compresses a batch body from 4 KiB
    async with run_broker(tmp_path) as broker:
        broker.topics.update(TopicConfig(TOPIC, 4, 4, 6))
        handled = SendProcessor(broker).handle(
            batch_request(zlib.compress(encode_batch(items), 5), COMPRESSED_FLAG), PeerConnection()
        )
        assert inspect.isawaitable(handled)  # inflated off the event loop
        answer = await handled
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert len(answer.ext_fields["msgId"].split(",")) == len(items)
        assert broker.store is not None and broker.store.wait_dispatched()
        stored = [decode_record(r) for r in broker.store.get_message(TOPIC, 2, 0, 32).messages]
        assert [m.body for m in stored] == [body for body, _, _ in items]
        assert [m.uniq_key for m in stored] == [props["UNIQ_KEY"] for _, props, _ in items]
        assert all(m.sys_flag & COMPRESSED_FLAG == 0 for m in stored)


@pytest.mark.parametrize(
    ("body", "remark"),
    [
        (b"\x78\x5e not zlib at all", "corrupt"),
        (zlib.compress(encode_batch(batch_items(8)))[:-10], "truncated"),
        (zlib.compress(b"\0" * (64 * 1024 + 1)), "inflates to more than 65536 bytes"),
        (zlib.compress(encode_batch(batch_items(8))) + b"tail", "data after its end"),
    ],
)
async def test_a_bad_compressed_batch_is_refused_and_nothing_is_stored(
    tmp_path: Path, body: bytes, remark: str
) -> None:
    async with run_broker(tmp_path, store={"max_message_size": 64 * 1024}) as broker:
        broker.topics.update(TopicConfig(TOPIC, 4, 4, 6))
        answer = await answered(
            SendProcessor(broker).handle(batch_request(body, COMPRESSED_FLAG), PeerConnection())
        )
        assert answer.code == ResponseCode.MESSAGE_ILLEGAL and remark in (answer.remark or "")
        assert broker.store is not None and broker.store.get_max_offset_in_queue(TOPIC, 2) == 0


def test_the_header_is_read_from_either_spelling_with_defaults_for_empty_fields() -> None:
    v1 = parse_send_header(send_request(queue_id=3))
    assert (v1.topic, v1.queue_id, v1.born_timestamp, v1.batch) == (TOPIC, 3, 1700000000000, False)
    v2 = RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, {"a": "g", "b": TOPIC, "e": "2", "f": "", "g": "5", "m": "true"}, b"x"
    )
    header = parse_send_header(v2)
    assert (header.producer_group, header.queue_id, header.sys_flag, header.born_timestamp) == ("g", 2, 0, 5)
    assert header.batch and header.default_topic == "TBW102" and header.default_topic_queue_nums == 4


@pytest.mark.parametrize("name", ["queueId", "sysFlag", "bornTimestamp", "reconsumeTimes"])
def test_a_header_number_that_is_no_number_is_named(name: str) -> None:
    request = send_request()
    request.ext_fields[name] = "12x"
    with pytest.raises(SendError) as caught:
        parse_send_header(request)
    assert caught.value.code == ResponseCode.SYSTEM_ERROR
    assert caught.value.remark == f"header field {name} is not a number: '12x'"


async def test_a_batch_flagged_compressed_without_a_zlib_stream_keeps_the_flag_on_each_item(
    tmp_path: Path,
) -> None:
    # As a Java broker stores it: COMPRESSED on a batch means each item's body is compressed.
    items = [(zlib.compress(b"item-%d" % i), {"TAGS": "TagA"}, 0) for i in range(3)]
    async with run_broker(tmp_path) as broker:
        broker.topics.update(TopicConfig(TOPIC, 4, 4, 6))
        answer = await answered(
            SendProcessor(broker).handle(
                batch_request(encode_batch(items), COMPRESSED_FLAG), PeerConnection()
            )
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert broker.store is not None and broker.store.wait_dispatched()
        stored = [decode_record(r) for r in broker.store.get_message(TOPIC, 2, 0, 32).messages]
        assert [m.uncompressed_body() for m in stored] == [b"item-%d" % i for i in range(3)]
        assert all(m.sys_flag & COMPRESSED_FLAG for m in stored)
