"""Subscription groups: per consumer group settings (RocketMQ ``SubscriptionGroupManager``).
The config value is ``broker_core.model.groupconfig``'s, shared with the clients and
re-exported here.

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

from collections.abc import Mapping
from typing import Any

from broker_core.model.groupconfig import (
    MASTER_ID,
    GroupName,
    SubscriptionGroupConfig,
    SubscriptionGroupConfigJson,
)
from broker_core.store.configfile import VersionedConfigTable
from broker_core.topics import (
    CID_RMQ_SYS_PREFIX,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    TOOLS_CONSUMER_GROUP,
)

__all__ = [
    "BUILT_IN_CONSUMER_GROUPS",
    "MASTER_ID",
    "SUBSCRIPTION_GROUP_FILE",
    "GroupName",
    "SubscriptionGroupConfig",
    "SubscriptionGroupConfigJson",
    "SubscriptionGroupManager",
    "group_not_exist_remark",
    "is_built_in_consumer_group",
]

SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"

# Groups RocketMQ's own tools consume with (names in broker_core/topics.py): known on every
# broker, never stored, so browsing messages works whatever autoCreateSubscriptionGroup says.
BUILT_IN_CONSUMER_GROUPS = frozenset(
    {TOOLS_CONSUMER_GROUP, FILTERSRV_CONSUMER_GROUP, SELF_TEST_CONSUMER_GROUP}
)


class SubscriptionGroupManager(VersionedConfigTable[SubscriptionGroupConfig]):
    """Every consumer group's settings, saved in ``subscriptionGroup.json``."""

    FILE_NAME = SUBSCRIPTION_GROUP_FILE
    TABLE_KEY = "subscriptionGroupTable"
    NAME_KEY = "groupName"
    KIND = "group"

    @staticmethod
    def name_of(config: SubscriptionGroupConfig) -> str:
        return config.group_name

    @staticmethod
    def config_from_json(obj: Mapping[str, Any]) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig.from_json(obj)

    def find(self, group: GroupName, *, auto_create: bool) -> SubscriptionGroupConfig | None:
        """The group's config; an unknown group is created with defaults when ``auto_create``
        (RocketMQ's ``findSubscriptionGroupConfig``), else None.

        RocketMQ's built-in tool groups are always found, with default settings and without
        being stored, as RocketMQ keeps them in memory from its start.
        """
        config = self.get(group)
        if config is not None:
            return config
        if is_built_in_consumer_group(group):
            return SubscriptionGroupConfig(group)
        if not auto_create:
            return None
        self.ensure(SubscriptionGroupConfig(group))
        return self.get(group)


def is_built_in_consumer_group(group: GroupName) -> bool:
    """Whether ``group`` is one RocketMQ's tools and system consumers use (``MixAll``)."""
    return group in BUILT_IN_CONSUMER_GROUPS or group.startswith(CID_RMQ_SYS_PREFIX)


def group_not_exist_remark(group: GroupName) -> str:
    """SUBSCRIPTION_GROUP_NOT_EXIST's remark: RocketMQ's words, then what to do about it."""
    return (
        f"subscription group not exist, {group}: this broker has autoCreateSubscriptionGroup=false, "
        "so create the group first (quiver-admin updateSubGroup, or the console)"
    )
