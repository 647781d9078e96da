"""The pieces behind the enforced switches: finding a group (auto-created or not), the send
header's maxReconsumeTimes in both spellings, the retry helpers, and the report of
broker.conf keys Quiver parses but does not act on."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.broker.groups import (
    TOOLS_CONSUMER_GROUP,
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
    group_not_exist_remark,
)
from broker_core.broker.processors.send import parse_send_header
from broker_core.broker.retry import max_reconsume_times, retry_group_of
from broker_core.config import (
    UNSUPPORTED_SETTINGS,
    BrokerConfig,
    ConfigError,
    StoreConfig,
    unsupported_settings,
    update_live_broker_config,
)
from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand


@pytest.fixture
def groups(tmp_path: Path) -> SubscriptionGroupManager:
    return SubscriptionGroupManager(tmp_path)


def test_it_finds_an_unknown_group_only_when_auto_creation_allows(groups: SubscriptionGroupManager) -> None:
    assert groups.find("orders", auto_create=False) is None
    assert "orders" not in groups.all()
    created = groups.find("orders", auto_create=True)
    assert created == SubscriptionGroupConfig("orders") and "orders" in groups.all()
    assert groups.find("orders", auto_create=False) == created


def test_it_always_knows_rocketmqs_tool_groups_without_storing_them(groups: SubscriptionGroupManager) -> None:
    for group in (TOOLS_CONSUMER_GROUP, "CID_RMQ_SYS_TRANS"):
        assert groups.find(group, auto_create=False) == SubscriptionGroupConfig(group)
    assert groups.all() == {}


def test_the_group_not_exist_remark_says_what_to_do() -> None:
    remark = group_not_exist_remark("orders")
    assert remark.startswith("subscription group not exist, orders")
    assert "autoCreateSubscriptionGroup" in remark and "updateSubGroup" in remark


def test_the_send_header_reads_max_reconsume_times_in_either_spelling() -> None:
    v1 = RemotingCommand.request(
        RequestCode.SEND_MESSAGE, {"topic": "%RETRY%g", "reconsumeTimes": "3", "maxReconsumeTimes": "5"}
    )
    v2 = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "%RETRY%g", "j": "3", "l": "5"})
    for request in (v1, v2):
        header = parse_send_header(request)
        assert (header.reconsume_times, header.max_reconsume_times) == (3, 5)
    plain = parse_send_header(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "t"}))
    assert plain.max_reconsume_times is None


def test_the_most_retries_is_the_clients_else_the_groups() -> None:
    config = SubscriptionGroupConfig("g", retry_max_times=2)
    assert max_reconsume_times(config, None) == 2
    assert max_reconsume_times(config, 7) == 7
    assert retry_group_of("%RETRY%g") == "g" and retry_group_of("orders") is None


def test_every_setting_is_acted_on_and_roles_agree_with_ids() -> None:
    store = StoreConfig("/s")
    assert UNSUPPORTED_SETTINGS == ()
    for role, broker_id in (("ASYNC_MASTER", 0), ("SYNC_MASTER", 0), ("SLAVE", 1)):
        config = BrokerConfig(broker_role=role, broker_id=broker_id)  # type: ignore[arg-type]
        assert unsupported_settings(config, store) == []
    with pytest.raises(ConfigError, match="SLAVE needs a brokerId above 0"):
        BrokerConfig(broker_role="SLAVE")
    with pytest.raises(ConfigError, match="brokerId = 2 is a slave's id"):
        BrokerConfig(broker_id=2)
    with pytest.raises(ConfigError, match="haMasterAddress must be host:port"):
        BrokerConfig(broker_role="SLAVE", broker_id=1, ha_master_address="nohost")
    assert BrokerConfig(listen_port=10911).ha_port == 10912
    assert BrokerConfig(listen_port=0).ha_port == 0
    assert BrokerConfig(ha_listen_port=20000).ha_port == 20000


def test_short_polling_time_is_live_and_never_negative() -> None:
    changed = update_live_broker_config(BrokerConfig(), {"shortPollingTimeMills": "250"})
    assert changed.short_polling_time_mills == 250
    with pytest.raises(ConfigError, match="shortPollingTimeMills"):
        BrokerConfig(short_polling_time_mills=-1)
