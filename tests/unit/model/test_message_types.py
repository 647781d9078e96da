"""Topic attributes and message types: RocketMQ 5's ``message.type``, how "+k=v,-k" changes
parse and apply, how a topic config carries them in JSON, and which messages a topic takes."""

from __future__ import annotations

import pytest

from broker_core.model.messagetype import (
    accepted_message_types,
    message_type_of,
    message_type_problem,
    message_type_refusal,
)
from broker_core.model.topicattributes import (
    TopicAttributeError,
    alter_attributes,
    format_attribute_changes,
    parse_attribute_changes,
)
from broker_core.model.topicconfig import TopicConfig

# -- parsing -------------------------------------------------------------------------------


def test_changes_parse_in_rocketmqs_syntax_and_format_back() -> None:
    text = "+message.type=FIFO,-reserve.time"
    changes = parse_attribute_changes(text)
    assert changes == {"message.type": "FIFO", "reserve.time": None}
    assert format_attribute_changes(changes) == text
    assert parse_attribute_changes("") == {}
    assert parse_attribute_changes(" +message.type=DELAY , ") == {"message.type": "DELAY"}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("message.type=FIFO", "add/alter attribute format is wrong"),
        ("+message.type=", "one value after one '='"),
        ("+message.type=A=B", "one value after one '='"),
        ("message.type", "delete attribute format is wrong"),
        ("+=FIFO", "kv string format wrong"),
        ("++message.type=FIFO", "kv string format wrong"),
        ("-", "kv string format wrong"),
        ("+message.type=FIFO,+message.type=NORMAL", "alter duplication key. key: message.type"),
        ("+message.type=FIFO,-message.type", "alter duplication key"),
    ],
)
def test_malformed_changes_are_refused_naming_the_item(text: str, words: str) -> None:
    with pytest.raises(TopicAttributeError, match=words):
        parse_attribute_changes(text)


# -- applying ------------------------------------------------------------------------------


def test_a_new_topic_takes_a_message_type() -> None:
    assert alter_attributes({}, {"message.type": "FIFO"}, create=True) == {"message.type": "FIFO"}
    assert alter_attributes({}, {}, create=True) == {}


def test_an_existing_topic_changes_or_drops_its_message_type_and_keeps_what_is_not_named() -> None:
    current = {"message.type": "FIFO", "queue.type": "SimpleCQ"}  # a Java broker's file
    assert alter_attributes(current, {"message.type": "DELAY"}, create=False) == {
        "message.type": "DELAY",
        "queue.type": "SimpleCQ",
    }
    assert alter_attributes(current, {"message.type": None}, create=False) == {"queue.type": "SimpleCQ"}
    assert alter_attributes(current, {}, create=False) == current


@pytest.mark.parametrize(
    ("current", "changes", "create", "words"),
    [
        ({}, {"message.type": None}, True, "only add attribute is supported while creating topic"),
        ({}, {"message.type": None}, False, "attempt to delete a nonexistent key: message.type"),
        ({}, {"message.type": "fifo"}, True, "must be one of UNSPECIFIED, NORMAL, FIFO, DELAY"),
        ({}, {"colour": "red"}, True, "unsupported key: colour; Quiver's topic attributes: message.type"),
        ({}, {"cleanup.policy": "COMPACTION"}, True, "storage attribute Quiver does not have"),
    ],
)
def test_changes_that_may_not_be_made_are_refused_saying_why(
    current: dict[str, str], changes: dict[str, str | None], create: bool, words: str
) -> None:
    with pytest.raises(TopicAttributeError, match=words):
        alter_attributes(current, changes, create=create)


# -- the config ----------------------------------------------------------------------------


def test_a_config_without_attributes_is_normal_and_writes_none() -> None:
    config = TopicConfig("Orders")
    assert config.message_type == "NORMAL" and config.attributes == {}
    assert "attributes" not in config.to_json()
    assert TopicConfig.from_json({"topicName": "Orders", "attributes": None}) == config


def test_a_config_round_trips_its_attributes_through_json() -> None:
    config = TopicConfig("Orders", 4, 4, attributes={"message.type": "TRANSACTION"})
    assert config.message_type == "TRANSACTION"
    assert config.to_json()["attributes"] == {"message.type": "TRANSACTION"}
    assert TopicConfig.from_json(config.to_json()) == config
    assert config != TopicConfig("Orders", 4, 4)
    assert hash(config) == hash(TopicConfig("Orders", 4, 4))  # usable in sets all the same


def test_a_config_keeps_a_copy_of_its_attributes() -> None:
    given = {"message.type": "FIFO"}
    config = TopicConfig("Orders", attributes=given)
    given["message.type"] = "DELAY"
    assert config.message_type == "FIFO"


def test_bad_attributes_are_refused_in_json_and_as_problems() -> None:
    with pytest.raises(ValueError, match="attributes must map strings to strings"):
        TopicConfig.from_json({"topicName": "Orders", "attributes": {"message.type": 3}})
    with pytest.raises(ValueError, match="attributes must be a JSON object"):
        TopicConfig.from_json({"topicName": "Orders", "attributes": ["message.type"]})
    problem = TopicConfig("Orders", attributes={"message.type": "SOMETIMES"}).problem()
    assert problem is not None and "must be one of" in problem
    assert TopicConfig("Orders", attributes={"queue.type": "SimpleCQ"}).problem() is None


# -- message types -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("properties", "kind"),
    [
        ({}, "NORMAL"),
        ({"TAGS": "a", "KEYS": "k"}, "NORMAL"),
        ({"__SHARDINGKEY": "order-1"}, "FIFO"),
        ({"DELAY": "3"}, "DELAY"),
        ({"TIMER_DELIVER_MS": "1700000000000"}, "DELAY"),
        ({"TIMER_DELAY_SEC": "10"}, "DELAY"),
        ({"TIMER_DELAY_MS": "500"}, "DELAY"),
        ({"TRAN_MSG": "true"}, "TRANSACTION"),
        ({"TRAN_MSG": "false"}, "NORMAL"),
        # RocketMQ's precedence: a transaction first, then a delay, then a message group.
        ({"TRAN_MSG": "true", "DELAY": "3", "__SHARDINGKEY": "g"}, "TRANSACTION"),
        ({"DELAY": "3", "__SHARDINGKEY": "g"}, "DELAY"),
    ],
)
def test_a_messages_type_comes_from_its_properties(properties: dict[str, str], kind: str) -> None:
    assert message_type_of(properties) == kind


def test_a_topic_takes_its_own_type_and_mixed_takes_all() -> None:
    assert message_type_problem("FIFO", "FIFO") is None
    assert message_type_problem("MIXED", "DELAY") is None
    assert message_type_problem("NORMAL", "DELAY") == (
        "TopicMessageType validate failed, the expected type is NORMAL, but actual type is DELAY"
    )
    assert message_type_problem("UNSPECIFIED", "NORMAL") is not None
    assert message_type_problem("MIXED", "UNSPECIFIED") is not None
    assert accepted_message_types("FIFO") == ("FIFO",)
    assert accepted_message_types("MIXED") == ("NORMAL", "FIFO", "DELAY", "TRANSACTION")
    assert accepted_message_types("UNSPECIFIED") == ("UNSPECIFIED",)


def test_retry_dead_letter_and_forwarded_messages_are_not_checked() -> None:
    assert message_type_refusal("Orders", "FIFO", {}) is not None
    assert message_type_refusal("%RETRY%billing", "FIFO", {}) is None
    assert message_type_refusal("%DLQ%billing", "FIFO", {}) is None
    assert message_type_refusal("Orders", "FIFO", {"TRANSFER_FLAG": "true"}) is None
