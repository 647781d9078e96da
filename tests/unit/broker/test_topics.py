from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest

from broker_core.broker.topics import (
    PERM_INHERIT,
    PERM_PRIORITY,
    PERM_READ,
    PERM_WRITE,
    TopicConfig,
    TopicConfigManager,
    is_inherited,
    is_readable,
    is_writeable,
)
from broker_core.errors import MessageIllegalError


@pytest.fixture
def topics(tmp_path: Path) -> TopicConfigManager:
    return TopicConfigManager(tmp_path)


def test_it_defaults_to_rocketmqs_topic_config() -> None:
    config = TopicConfig("Payments")
    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (16, 16, 6)
    assert (config.topic_filter_type, config.topic_sys_flag, config.order) == ("SINGLE_TAG", 0, False)
    assert config.readable and config.writeable


def test_it_reads_permission_bits() -> None:
    assert (PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT) == (8, 4, 2, 1)
    assert is_readable(PERM_READ) and not is_writeable(PERM_READ)
    assert is_writeable(PERM_WRITE | PERM_INHERIT) and not is_readable(PERM_WRITE)
    assert is_inherited(7) and not is_inherited(6)


def test_it_converts_a_topic_config_to_and_from_rocketmqs_json() -> None:
    config = TopicConfig("Payments", 8, 4, PERM_READ, "MULTI_TAG", 1, True)
    assert config.to_json() == {
        "topicName": "Payments",
        "readQueueNums": 8,
        "writeQueueNums": 4,
        "perm": 4,
        "topicFilterType": "MULTI_TAG",
        "topicSysFlag": 1,
        "order": True,
    }
    assert TopicConfig.from_json(config.to_json()) == config


def test_it_fills_absent_json_fields_with_defaults_and_ignores_unknown_ones() -> None:
    config = TopicConfig.from_json({"topicName": "Payments", "perm": 7, "attributes": {}})
    assert config == TopicConfig("Payments", perm=7)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"perm": 6}, "topicName must be a string"),
        ({"topicName": "T", "readQueueNums": "8"}, "readQueueNums must be an integer"),
        ({"topicName": "T", "order": 1}, "order must be true or false"),
        ({"topicName": "T", "topicFilterType": "SQL92"}, "topicFilterType must be"),
    ],
)
def test_it_rejects_malformed_json(obj: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TopicConfig.from_json(obj)


def test_it_stores_and_returns_topic_configs(topics: TopicConfigManager) -> None:
    payments = TopicConfig("Payments", 4, 4)
    topics.update(payments)
    topics.update(TopicConfig("Refunds"))
    assert topics.get("Payments") == payments
    assert topics.get("Missing") is None
    assert topics.contains("Refunds") and "Refunds" in topics
    assert "Missing" not in topics
    assert set(topics.all()) == {"Payments", "Refunds"}


def test_it_replaces_a_config_on_update(topics: TopicConfigManager) -> None:
    topics.update(TopicConfig("Payments", 4, 4))
    topics.update(TopicConfig("Payments", 8, 8, PERM_READ))
    assert topics.get("Payments") == TopicConfig("Payments", 8, 8, PERM_READ)


def test_it_returns_a_copy_of_the_table(topics: TopicConfigManager) -> None:
    topics.update(TopicConfig("Payments"))
    topics.all().clear()
    assert "Payments" in topics


def test_it_deletes_topics(topics: TopicConfigManager) -> None:
    topics.update(TopicConfig("Payments"))
    assert topics.delete("Payments") is True
    assert topics.delete("Payments") is False
    assert topics.get("Payments") is None


def test_it_ensures_a_topic_without_overwriting_an_existing_one(topics: TopicConfigManager) -> None:
    assert topics.ensure(TopicConfig("TBW102", 8, 8, 7)) is True
    assert topics.ensure(TopicConfig("TBW102", 16, 16, 6)) is False
    assert topics.get("TBW102") == TopicConfig("TBW102", 8, 8, 7)


def test_it_moves_the_data_version_on_every_change(topics: TopicConfigManager) -> None:
    counters = [topics.data_version.counter]
    topics.update(TopicConfig("Payments"))
    counters.append(topics.data_version.counter)
    topics.ensure(TopicConfig("Payments"))  # already there: no change
    counters.append(topics.data_version.counter)
    topics.delete("Payments")
    counters.append(topics.data_version.counter)
    topics.delete("Payments")  # already gone: no change
    counters.append(topics.data_version.counter)
    assert counters == [0, 1, 1, 2, 2]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (TopicConfig(""), "topic name is empty"),
        (TopicConfig("Pay ments"), "may only contain"),
        (TopicConfig("T" * 128), "longer than 127"),
        (
            TopicConfig("Payments", read_queue_nums=0),
            r"readQueueNums of topic 'Payments' must be 1\.\.1024, not 0$",
        ),
        (TopicConfig("Payments", write_queue_nums=1025), "writeQueueNums of topic 'Payments' must be"),
        (TopicConfig("Payments", perm=16), "perm of topic 'Payments' must be 0..15, not 16"),
        (TopicConfig("Payments", perm=-1), "perm of topic 'Payments' must be 0..15"),
        (TopicConfig("Payments", topic_filter_type="SQL92"), "topicFilterType"),  # type: ignore[arg-type]
    ],
)
def test_it_rejects_invalid_configs_clearly(
    topics: TopicConfigManager, config: TopicConfig, message: str
) -> None:
    with pytest.raises(MessageIllegalError, match=message):
        topics.update(config)
    with pytest.raises(MessageIllegalError, match=message):
        topics.ensure(config)
    assert topics.all() == {}
    assert not topics.config_file_path.exists()


def test_it_persists_on_every_change(tmp_path: Path, topics: TopicConfigManager) -> None:
    topics.update(TopicConfig("Payments", 4, 2, PERM_READ | PERM_WRITE, order=True))
    topics.ensure(TopicConfig("TBW102", 8, 8, 7))
    topics.update(TopicConfig("Refunds"))
    topics.delete("Refunds")

    reloaded = TopicConfigManager(tmp_path)
    assert reloaded.load()
    assert reloaded.all() == topics.all()
    assert reloaded.data_version == topics.data_version


def test_it_writes_rocketmqs_file_shape(tmp_path: Path, topics: TopicConfigManager) -> None:
    topics.update(TopicConfig("Payments", 4, 4))
    path = tmp_path / "config" / "topics.json"
    assert topics.config_file_path == path
    obj = orjson.loads(path.read_bytes())
    assert obj["dataVersion"]["counter"] == 1
    assert obj["topicConfigTable"] == {"Payments": TopicConfig("Payments", 4, 4).to_json()}


def test_it_loads_a_java_brokers_file(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},'
        '"topicConfigTable":{"TBW102":{"attributes":{},"order":false,"perm":7,"readQueueNums":8,'
        '"topicFilterType":"SINGLE_TAG","topicName":"TBW102","topicSysFlag":0,"writeQueueNums":8}}}'
    )
    topics = TopicConfigManager(tmp_path)
    assert topics.load()
    assert topics.get("TBW102") == TopicConfig("TBW102", 8, 8, 7)
    assert topics.data_version.counter == 3


def test_it_falls_back_to_the_backup_when_a_topic_entry_is_malformed(tmp_path: Path) -> None:
    topics = TopicConfigManager(tmp_path)
    topics.update(TopicConfig("Payments"))
    topics.update(TopicConfig("Refunds"))
    bad = orjson.loads(topics.config_file_path.read_bytes())
    bad["topicConfigTable"]["Refunds"]["readQueueNums"] = "lots"
    topics.config_file_path.write_bytes(orjson.dumps(bad))

    reloaded = TopicConfigManager(tmp_path)
    assert reloaded.load()
    assert set(reloaded.all()) == {"Payments"}


def test_it_keeps_configs_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        TopicConfig("Payments").perm = 2  # type: ignore[misc]
