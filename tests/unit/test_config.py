"""Typed configuration read from RocketMQ-style files (``broker_core.config``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.config import (
    BrokerConfig,
    NamesrvConfig,
    StoreConfig,
    camel_to_snake,
    load_broker_config,
    load_properties,
    parse_delay_levels,
)
from broker_core.errors import ConfigError


def test_it_reads_rocketmq_style_files_with_comments_and_both_separators(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# comment\n! also a comment\n\nbrokerName = broker-b\nlistenPort:10921\nnamesrvAddr = a:1;b:2\n"
    )
    assert load_properties(conf) == {
        "brokerName": "broker-b",
        "listenPort": "10921",
        "namesrvAddr": "a:1;b:2",
    }


def test_it_names_the_line_that_is_not_a_setting(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName = b\njust words\n")
    with pytest.raises(ConfigError, match="broker.conf:2"):
        load_properties(conf)


def test_it_maps_rocketmq_keys_to_fields_acronyms_included() -> None:
    assert camel_to_snake("brokerIP1") == "broker_ip1"
    assert camel_to_snake("mappedFileSizeCommitLog") == "mapped_file_size_commit_log"
    assert camel_to_snake("aclEnable") == "acl_enable"


def test_it_splits_a_broker_conf_into_broker_and_store_settings_and_reports_unknown_keys() -> None:
    broker, store, unknown = load_broker_config(
        {
            "brokerClusterName": "Prod",
            "brokerName": "broker-b",
            "brokerId": "0",
            "brokerIP1": "10.0.0.5",
            "listenPort": "10921",
            "namesrvAddr": "10.0.0.1:9876; 10.0.0.2:9876",
            "storePathRootDir": "/data/store",
            "flushDiskType": "SYNC_FLUSH",
            "fileReservedTime": "48",
            "deleteWhen": "03",
            "autoCreateTopicEnable": "true",
            "aclEnable": "false",
            "brokerRoel": "SLAVE",
        }
    )
    assert (broker.broker_cluster_name, broker.broker_addr) == ("Prod", "10.0.0.5:10921")
    assert broker.namesrv_addrs == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert broker.auto_create_topic_enable and not broker.acl_enable
    assert (store.store_path_root_dir, store.flush_disk_type, store.file_reserved_time) == (
        "/data/store",
        "SYNC_FLUSH",
        48,
    )
    assert store.store_host == "10.0.0.5:10921"
    assert unknown == ["brokerRoel"]


def test_it_refuses_bad_values_with_the_key_named() -> None:
    with pytest.raises(ConfigError, match="listenPort"):
        load_broker_config({"storePathRootDir": "/s", "listenPort": "many"})
    with pytest.raises(ConfigError, match="storePathRootDir"):
        load_broker_config({"brokerName": "b"})
    with pytest.raises(ConfigError, match="aclEnable"):
        load_broker_config({"storePathRootDir": "/s", "aclEnable": "maybe"})
    with pytest.raises(ConfigError, match="brokerRole"):
        BrokerConfig(broker_role="LEADER")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="flushDiskType"):
        StoreConfig("/s", flush_disk_type="SOMETIMES")  # type: ignore[arg-type]


def test_it_defaults_auto_topic_creation_to_off_and_reads_namesrv_settings() -> None:
    assert BrokerConfig().auto_create_topic_enable is False
    config, unknown = NamesrvConfig.from_properties({"listenPort": "9877", "rocketmqHome": "/opt"})
    assert config.listen_port == 9877 and unknown == ["rocketmqHome"]


def test_it_parses_delay_levels_and_refuses_nonsense() -> None:
    assert parse_delay_levels("1s 5s 1m 2h 1d") == (1000, 5000, 60_000, 7_200_000, 86_400_000)
    with pytest.raises(ConfigError, match="3x"):
        parse_delay_levels("1s 3x")


def test_config_properties_round_trip_through_rocketmq_key_names() -> None:
    from broker_core.config import BrokerConfig, config_properties, load_broker_config

    broker = BrokerConfig(broker_ip1="10.0.0.5", auto_create_topic_enable=True, broker_name="b-1")
    props = config_properties(broker)
    assert props["brokerIP1"] == "10.0.0.5" and props["autoCreateTopicEnable"] == "true"
    again, _store, unknown = load_broker_config({**props, "storePathRootDir": "/tmp/x"})
    assert unknown == [] and again == broker


def test_a_secret_setting_is_masked_where_settings_are_read() -> None:
    from broker_core.config import BrokerConfig, config_properties

    shown = config_properties(BrokerConfig(tls_server_key_password="s3cret"))
    assert shown["tlsServerKeyPassword"] == "******"
    assert config_properties(BrokerConfig())["tlsServerKeyPassword"] == ""
