from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from broker_core.broker.groups import SubscriptionGroupConfig, SubscriptionGroupManager
from broker_core.errors import MessageIllegalError


@pytest.fixture
def groups(tmp_path: Path) -> SubscriptionGroupManager:
    return SubscriptionGroupManager(tmp_path)


def test_it_defaults_to_rocketmqs_group_config() -> None:
    config = SubscriptionGroupConfig("orders")
    assert config.consume_enable and config.consume_from_min_enable and config.consume_broadcast_enable
    assert (config.retry_queue_nums, config.retry_max_times) == (1, 16)
    assert (config.broker_id, config.which_broker_when_consume_slowly) == (0, 1)
    assert config.notify_consumer_ids_changed_enable


def test_it_converts_a_group_config_to_and_from_rocketmqs_json() -> None:
    config = SubscriptionGroupConfig("orders", consume_enable=False, retry_max_times=3, broker_id=1)
    assert config.to_json() == {
        "groupName": "orders",
        "consumeEnable": False,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": True,
        "retryQueueNums": 1,
        "retryMaxTimes": 3,
        "brokerId": 1,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
        "consumeMessageOrderly": False,
    }
    assert SubscriptionGroupConfig.from_json(config.to_json()) == config
    fifo = SubscriptionGroupConfig("orders", consume_message_orderly=True)
    assert SubscriptionGroupConfig.from_json(fifo.to_json()).consume_message_orderly


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({}, "groupName must be a string"),
        ({"groupName": "g", "consumeEnable": "yes"}, "consumeEnable must be true or false"),
        ({"groupName": "g", "retryMaxTimes": 1.5}, "retryMaxTimes must be an integer"),
    ],
)
def test_it_rejects_malformed_json(obj: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SubscriptionGroupConfig.from_json(obj)


def test_it_stores_returns_and_deletes_group_configs(groups: SubscriptionGroupManager) -> None:
    orders = SubscriptionGroupConfig("orders", retry_max_times=5)
    groups.update(orders)
    groups.update(SubscriptionGroupConfig("audit"))
    assert groups.get("orders") == orders
    assert groups.get("missing") is None
    assert groups.contains("audit") and "audit" in groups
    assert set(groups.all()) == {"orders", "audit"}
    assert groups.delete("audit") is True
    assert groups.delete("audit") is False
    assert set(groups.all()) == {"orders"}


def test_it_replaces_a_config_on_update_and_keeps_it_on_ensure(groups: SubscriptionGroupManager) -> None:
    assert groups.ensure(SubscriptionGroupConfig("orders")) is True
    groups.update(SubscriptionGroupConfig("orders", consume_enable=False))
    assert groups.ensure(SubscriptionGroupConfig("orders")) is False
    assert groups.get("orders") == SubscriptionGroupConfig("orders", consume_enable=False)


def test_it_moves_the_data_version_on_every_change(groups: SubscriptionGroupManager) -> None:
    groups.update(SubscriptionGroupConfig("orders"))
    groups.ensure(SubscriptionGroupConfig("orders"))
    groups.delete("orders")
    groups.delete("orders")
    assert groups.data_version.counter == 2


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (SubscriptionGroupConfig(""), "group name is empty"),
        (SubscriptionGroupConfig("or@ders"), "may only contain"),
        (SubscriptionGroupConfig("g" * 256), "longer than 255"),
        (SubscriptionGroupConfig("orders", retry_max_times=-1), "retryMaxTimes of group 'orders' must be"),
        (SubscriptionGroupConfig("orders", retry_queue_nums=-2), "retryQueueNums of group 'orders' must be"),
    ],
)
def test_it_rejects_invalid_configs_clearly(
    groups: SubscriptionGroupManager, config: SubscriptionGroupConfig, message: str
) -> None:
    with pytest.raises(MessageIllegalError, match=message):
        groups.update(config)
    assert groups.all() == {}


def test_it_persists_on_every_change(tmp_path: Path, groups: SubscriptionGroupManager) -> None:
    groups.update(SubscriptionGroupConfig("orders", retry_max_times=3))
    groups.update(SubscriptionGroupConfig("audit", consume_broadcast_enable=False))
    groups.delete("audit")

    reloaded = SubscriptionGroupManager(tmp_path)
    assert reloaded.load()
    assert reloaded.all() == {"orders": SubscriptionGroupConfig("orders", retry_max_times=3)}
    assert reloaded.data_version == groups.data_version


def test_it_writes_rocketmqs_file_shape(tmp_path: Path, groups: SubscriptionGroupManager) -> None:
    groups.update(SubscriptionGroupConfig("orders"))
    path = tmp_path / "config" / "subscriptionGroup.json"
    assert groups.config_file_path == path
    obj = orjson.loads(path.read_bytes())
    assert set(obj) == {"dataVersion", "subscriptionGroupTable"}
    assert obj["subscriptionGroupTable"] == {"orders": SubscriptionGroupConfig("orders").to_json()}


def test_it_loads_a_java_brokers_file(tmp_path: Path) -> None:
    path = tmp_path / "config" / "subscriptionGroup.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"dataVersion":{"counter":1,"stateVersion":0,"timestamp":1700000000000},'
        '"forbiddenTable":{},"subscriptionGroupTable":{"orders":{"brokerId":0,'
        '"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,'
        '"consumeMessageOrderly":false,"consumeTimeoutMinute":15,"groupName":"orders",'
        '"groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,'
        '"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,'
        '"whichBrokerWhenConsumeSlowly":1}}}'
    )
    groups = SubscriptionGroupManager(tmp_path)
    assert groups.load()
    assert groups.get("orders") == SubscriptionGroupConfig("orders")
    assert groups.data_version.counter == 1
