"""Topic message types (RocketMQ 5's ``message.type`` attribute) on a real broker: set at
creation, kept or changed by updates, read back one topic at a time (GET_TOPIC_CONFIG) and
in the whole table, refused when malformed or unknown, kept across a restart; and, with
``enableTopicMessageTypeCheck``, a send of the wrong type refused with RocketMQ's remark."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import orjson
import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client import AdminClient, AdminError
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.errors import BrokerRefusedError
from broker_core.model.message import encode_properties
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_broker, run_namesrv

from .clusterhelpers import raw_client, started, wait_until_routed

CHECKED = {"enable_topic_message_type_check": True}


async def test_a_topics_message_type_is_set_kept_changed_refused_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    async with run_namesrv() as ns, AdminClient(ns.address) as admin:
        async with run_broker(store, ns.address) as broker:
            await admin.create_or_update_topic(
                TopicConfig("Fifos", 4, 4), cluster="DefaultCluster", attributes="+message.type=FIFO"
            )
            await wait_until_routed(ns, "Fifos")
            config = await admin.topic_config("Fifos")
            assert config.attributes == {"message.type": "FIFO"} and config.message_type == "FIFO"
            assert await admin.topic_message_type("Fifos") == "FIFO"
            assert (await admin.topic_configs(broker.address))["Fifos"] == config

            # An update naming no attribute keeps the type; one naming it changes it.
            await admin.create_or_update_topic(TopicConfig("Fifos", 2, 2), broker_addr=broker.address)
            kept = await admin.topic_config("Fifos", broker_addr=broker.address)
            assert (kept.read_queue_nums, kept.message_type) == (2, "FIFO")
            await admin.create_or_update_topic(
                TopicConfig("Fifos", 2, 2), broker_addr=broker.address, attributes={"message.type": "DELAY"}
            )
            assert await admin.topic_message_type("Fifos") == "DELAY"
            # A config's own attributes are sent when no change is named.
            await admin.create_or_update_topic(
                TopicConfig("Txns", 1, 1, attributes={"message.type": "TRANSACTION"}),
                broker_addr=broker.address,
            )
            assert (
                await admin.topic_config("Txns", broker_addr=broker.address)
            ).message_type == "TRANSACTION"
            await admin.create_or_update_topic(
                TopicConfig("Txns", 1, 1), broker_addr=broker.address, attributes="-message.type"
            )
            assert (await admin.topic_config("Txns", broker_addr=broker.address)).attributes == {}

            await expect_refusals(admin, broker)
            assert await admin.topic_message_type("NoSuchTopic") == "UNSPECIFIED"

        # The next broker on this store reads the attribute back from topics.json.
        saved = orjson.loads((store / "config" / "topics.json").read_bytes())
        assert saved["topicConfigTable"]["Fifos"]["attributes"] == {"message.type": "DELAY"}
        assert "attributes" not in saved["topicConfigTable"]["Txns"]
        async with run_broker(store, ns.address) as again:
            config = await admin.topic_config("Fifos", broker_addr=again.address)
            assert config.message_type == "DELAY" and config.read_queue_nums == 2


async def expect_refusals(admin: AdminClient, broker: BrokerController) -> None:
    """Bad attribute changes: each refused with a remark that says why, nothing changed."""
    cases = [
        ("+message.type=SOMETIMES", ResponseCode.SYSTEM_ERROR, "value is not in set"),
        ("+colour=red", ResponseCode.SYSTEM_ERROR, "unsupported key: colour"),
        ("+message.type=MIXED", ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported."),
    ]
    for attributes, code, words in cases:
        with pytest.raises(AdminError) as refused:
            await admin.create_or_update_topic(
                TopicConfig("Fifos", 2, 2), broker_addr=broker.address, attributes=attributes
            )
        assert refused.value.code == code and words in (refused.value.remark or ""), refused.value
    with pytest.raises(AdminError, match="only add attribute is supported while creating topic") as refused:
        await admin.create_or_update_topic(
            TopicConfig("Brandnew"), broker_addr=broker.address, attributes="-message.type"
        )
    assert "Brandnew" not in await admin.topic_configs(broker.address)
    # A malformed string never leaves the client.
    with pytest.raises(AdminError, match="add/alter attribute format is wrong") as malformed:
        await admin.create_or_update_topic(
            TopicConfig("Fifos"), broker_addr=broker.address, attributes="message.type=FIFO"
        )
    assert malformed.value.code is None
    assert (await admin.topic_config("Fifos", broker_addr=broker.address)).message_type == "DELAY"
    missing = await admin._send(broker.address, RequestCode.GET_TOPIC_CONFIG, {"topic": "Nope"})
    assert (
        missing.code == ResponseCode.TOPIC_NOT_EXIST
        and missing.remark == "No topic in this broker. topic: Nope"
    )


def send(topic: str, body: bytes, **properties: str) -> RemotingCommand:
    header = {
        "producerGroup": "typed-producers",
        "topic": topic,
        "queueId": "0",
        "sysFlag": "0",
        "properties": encode_properties(properties).decode(),
    }
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, header, body)


async def create(client: RemotingClient, broker: BrokerController, topic: str, attributes: str = "") -> None:
    fields = {
        "topic": topic,
        "readQueueNums": "1",
        "writeQueueNums": "1",
        "perm": "6",
        "attributes": attributes,
    }
    created = await client.invoke(
        broker.address, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
    )
    assert created.code == ResponseCode.SUCCESS, created.remark


async def test_a_checking_broker_refuses_a_message_of_the_wrong_type(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store", **CHECKED) as broker, raw_client() as client:
        await create(client, broker, "Fifos", "+message.type=FIFO")
        await create(client, broker, "Plain")

        plain_to_fifo = await client.invoke(broker.address, send("Fifos", b"no group"))
        assert plain_to_fifo.code == ResponseCode.MESSAGE_ILLEGAL
        assert plain_to_fifo.remark == (
            "TopicMessageType validate failed, the expected type is FIFO, but actual type is NORMAL"
        )
        grouped = await client.invoke(broker.address, send("Fifos", b"grouped", __SHARDINGKEY="order-1"))
        assert grouped.code == ResponseCode.SUCCESS and grouped.ext_fields["queueOffset"] == "0"

        delayed = await client.invoke(broker.address, send("Plain", b"later", DELAY="2"))
        assert delayed.code == ResponseCode.MESSAGE_ILLEGAL and "actual type is DELAY" in (
            delayed.remark or ""
        )
        timer = await client.invoke(broker.address, send("Plain", b"later", TIMER_DELAY_SEC="5"))
        assert timer.code == ResponseCode.MESSAGE_ILLEGAL
        half = await client.invoke(broker.address, send("Plain", b"txn", TRAN_MSG="true"))
        assert half.code == ResponseCode.MESSAGE_ILLEGAL and "actual type is TRANSACTION" in (
            half.remark or ""
        )
        plain = await client.invoke(broker.address, send("Plain", b"now"))
        assert plain.code == ResponseCode.SUCCESS and plain.ext_fields["queueOffset"] == "0"

        # The check is live: switched off, the broker takes any type, as RocketMQ's broker does.
        switch = RemotingCommand.request(
            RequestCode.UPDATE_BROKER_CONFIG, {}, b"enableTopicMessageTypeCheck=false\n"
        )
        assert (await client.invoke(broker.address, switch)).code == ResponseCode.SUCCESS
        accepted = await client.invoke(broker.address, send("Fifos", b"no group"))
        assert accepted.code == ResponseCode.SUCCESS and accepted.ext_fields["queueOffset"] == "1"


async def test_a_producer_is_told_why_its_message_was_refused(tmp_path: Path) -> None:
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "store", ns.address, **CHECKED) as broker,
        AdminClient(ns.address) as admin,
    ):
        await admin.create_or_update_topic(
            TopicConfig("Delays", 2, 2), broker_addr=broker.address, attributes="+message.type=DELAY"
        )
        await wait_until_routed(ns, "Delays")
        async with started(Producer("typed-producers", ns.address)) as producer:
            with pytest.raises(BrokerRefusedError) as refused:
                await asyncio.to_thread(producer.send, Message("Delays", b"right now"))
            assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
            assert "the expected type is DELAY, but actual type is NORMAL" in refused.value.remark
            sent = await asyncio.to_thread(producer.send, Message("Delays", b"later", delay_level=1))
            assert sent.queue.topic == "Delays"


async def test_update_topic_takes_attributes_as_mqadmin_does(tmp_path: Path) -> None:
    from .test_admin_cli import cli, failed

    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        run = await cli(
            "updateTopic", "-n", ns.address, "-c", "DefaultCluster", "-t", "Fifos", "-a", "+message.type=FIFO"
        )
        assert run.code == 0, run.err
        assert re.search(r"^attributes += \+message\.type=FIFO$", run.out, re.M), run.out
        stored = broker.topics.get("Fifos")
        assert stored is not None and stored.attributes == {"message.type": "FIFO"}
        bad = await cli(
            "updateTopic", "-n", ns.address, "-c", "DefaultCluster", "-t", "Fifos", "-a", "+message.type=LIFO"
        )
        assert failed(bad, "value is not in set", "message.type must be one of"), bad.err
        malformed = await cli(
            "updateTopic", "-n", ns.address, "-b", broker.address, "-t", "Fifos", "-a", "message.type"
        )
        assert failed(malformed, "delete attribute format is wrong"), malformed.err
