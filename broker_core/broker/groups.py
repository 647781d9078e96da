"""Subscription groups: per consumer group settings (RocketMQ ``SubscriptionGroupConfig`` and
``SubscriptionGroupManager``).

Saved as ``<store root>/config/subscriptionGroup.json``::

    {
      "dataVersion": {"counter": 2, "timestamp": 1700000000000},
      "subscriptionGroupTable": {
        "<group>": {"groupName": "<group>", "consumeEnable": true, "retryQueueNums": 1,
                    "retryMaxTimes": 16, ...},
        ...
      }
    }

Thread-safe: every method takes the manager's lock; configs are immutable values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from broker_core.errors import MessageIllegalError
from broker_core.store.configfile import (
    Clock,
    ConfigFile,
    DataVersion,
    config_path,
    json_bool,
    json_int,
    json_object,
    json_str,
    now_ms,
)
from broker_core.topics import group_problem

SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"
MASTER_ID = 0

GroupName = str


class SubscriptionGroupConfigJson(TypedDict):
    groupName: str
    consumeEnable: bool
    consumeFromMinEnable: bool
    consumeBroadcastEnable: bool
    retryQueueNums: int
    retryMaxTimes: int
    brokerId: int
    whichBrokerWhenConsumeSlowly: int
    notifyConsumerIdsChangedEnable: bool


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """How one consumer group may consume from this broker.

    ``retry_max_times`` is how often a message is redelivered before it goes to the
    group's DLQ; ``retry_queue_nums`` is the queue count of its ``%RETRY%`` topic.
    ``broker_id`` is where the group pulls from (0 = the master) and
    ``which_broker_when_consume_slowly`` where it is sent when it falls far behind.
    """

    group_name: GroupName
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = MASTER_ID
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def problem(self) -> str | None:
        """Return why this config may not be stored, or None when it may."""
        name_problem = group_problem(self.group_name)
        if name_problem is not None:
            return name_problem
        for label, value in (
            ("retryQueueNums", self.retry_queue_nums),
            ("retryMaxTimes", self.retry_max_times),
            ("brokerId", self.broker_id),
            ("whichBrokerWhenConsumeSlowly", self.which_broker_when_consume_slowly),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return f"{label} of group {self.group_name!r} must be a non-negative integer, not {value!r}"
        return None

    def to_json(self) -> SubscriptionGroupConfigJson:
        return {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "brokerId": self.broker_id,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> SubscriptionGroupConfig:
        """Build from RocketMQ's camelCase JSON; absent fields take their defaults.

        Raises ``ValueError`` for a field of the wrong type; unknown keys (the Java
        broker's ``groupRetryPolicy``, ``attributes``, ...) are ignored.
        """
        return cls(
            group_name=json_str(obj, "groupName"),
            consume_enable=json_bool(obj, "consumeEnable", True),
            consume_from_min_enable=json_bool(obj, "consumeFromMinEnable", True),
            consume_broadcast_enable=json_bool(obj, "consumeBroadcastEnable", True),
            retry_queue_nums=json_int(obj, "retryQueueNums", 1),
            retry_max_times=json_int(obj, "retryMaxTimes", 16),
            broker_id=json_int(obj, "brokerId", MASTER_ID),
            which_broker_when_consume_slowly=json_int(obj, "whichBrokerWhenConsumeSlowly", 1),
            notify_consumer_ids_changed_enable=json_bool(obj, "notifyConsumerIdsChangedEnable", True),
        )


class SubscriptionGroupManager(ConfigFile):
    """Every consumer group's settings, saved in ``subscriptionGroup.json``."""

    def __init__(self, store_root: str | os.PathLike[str], *, clock: Clock = now_ms) -> None:
        super().__init__()
        self._path = config_path(store_root, SUBSCRIPTION_GROUP_FILE)
        self._clock = clock
        self._table: dict[GroupName, SubscriptionGroupConfig] = {}
        self._data_version = DataVersion(0, clock())

    @property
    def config_file_path(self) -> Path:
        return self._path

    @property
    def data_version(self) -> DataVersion:
        """A copy of the version, which moves on every change to the table."""
        with self._lock:
            return self._data_version.copy()

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        with self._lock:
            return self._table.get(group)

    def contains(self, group: str) -> bool:
        with self._lock:
            return group in self._table

    __contains__ = contains

    def all(self) -> dict[GroupName, SubscriptionGroupConfig]:
        """A copy of the table."""
        with self._lock:
            return dict(self._table)

    def update(self, config: SubscriptionGroupConfig) -> None:
        """Create or replace ``config.group_name``'s settings and persist the table.

        Raises ``MessageIllegalError`` saying what is wrong with an invalid config, and
        ``StoreError`` when the file cannot be written.
        """
        _validate(config)
        with self._lock:
            self._table[config.group_name] = config
            self._data_version.next_version(self._clock())
        self.persist()

    def ensure(self, config: SubscriptionGroupConfig) -> bool:
        """Add ``config`` unless the group already exists; return whether it was added."""
        _validate(config)
        with self._lock:
            if config.group_name in self._table:
                return False
            self._table[config.group_name] = config
            self._data_version.next_version(self._clock())
        self.persist()
        return True

    def delete(self, group: str) -> bool:
        """Remove ``group``'s settings and persist the table; return whether it existed."""
        with self._lock:
            if self._table.pop(group, None) is None:
                return False
            self._data_version.next_version(self._clock())
        self.persist()
        return True

    def encode(self) -> dict[str, Any]:
        return {
            "dataVersion": self._data_version.to_json(),
            "subscriptionGroupTable": {name: self._table[name].to_json() for name in sorted(self._table)},
        }

    def decode(self, obj: dict[str, Any]) -> None:
        table: dict[GroupName, SubscriptionGroupConfig] = {}
        for name, raw in json_object(obj, "subscriptionGroupTable").items():
            if not isinstance(raw, dict):
                raise ValueError(f"config of group {name!r} must be a JSON object")
            config = SubscriptionGroupConfig.from_json({"groupName": name, **raw})
            table[config.group_name] = config
        version = DataVersion.from_json(json_object(obj, "dataVersion"))
        self._table = table
        self._data_version = version


def _validate(config: SubscriptionGroupConfig) -> None:
    problem = config.problem()
    if problem is not None:
        raise MessageIllegalError(problem)
