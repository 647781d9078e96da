"""Topic configs: queue counts, permissions and attributes of every topic on this broker
(RocketMQ ``TopicConfigManager``).  The config values and permission bits are
``broker_core.model.topicconfig``'s, shared with the clients; they are re-exported here.

Saved as ``<store root>/config/topics.json``::

    {
      "dataVersion": {"counter": 3, "timestamp": 1700000000000},
      "topicConfigTable": {
        "<topic>": {"topicName": "<topic>", "readQueueNums": 16, "writeQueueNums": 16,
                    "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                    "order": false, "attributes": {"message.type": "FIFO"}},
        ...
      }
    }

The data version moves on every change; brokers send it with their registration so the
nameserver knows when routes changed.  The manager holds only what it is given: the broker
decides which system topics exist and adds them with ``ensure``.

Thread-safe: every method takes the manager's lock; configs are immutable values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from broker_core.model.topicattributes import alter_attributes
from broker_core.model.topicconfig import (
    DEFAULT_READ_QUEUE_NUMS,
    DEFAULT_WRITE_QUEUE_NUMS,
    MAX_QUEUE_NUMS,
    PERM_INHERIT,
    PERM_MAX,
    PERM_PRIORITY,
    PERM_READ,
    PERM_WRITE,
    TOPIC_FILTER_TYPES,
    TopicConfig,
    TopicConfigJson,
    TopicFilterType,
    TopicName,
    is_inherited,
    is_readable,
    is_writeable,
)
from broker_core.store.configfile import VersionedConfigTable

TOPICS_FILE = "topics.json"

__all__ = [
    "DEFAULT_READ_QUEUE_NUMS",
    "DEFAULT_WRITE_QUEUE_NUMS",
    "MAX_QUEUE_NUMS",
    "PERM_INHERIT",
    "PERM_MAX",
    "PERM_PRIORITY",
    "PERM_READ",
    "PERM_WRITE",
    "TOPICS_FILE",
    "TOPIC_FILTER_TYPES",
    "TopicConfig",
    "TopicConfigJson",
    "TopicConfigManager",
    "TopicFilterType",
    "TopicName",
    "is_inherited",
    "is_readable",
    "is_writeable",
]


class TopicConfigManager(VersionedConfigTable[TopicConfig]):
    """Every topic this broker serves, saved in ``topics.json``."""

    FILE_NAME = TOPICS_FILE
    TABLE_KEY = "topicConfigTable"
    NAME_KEY = "topicName"
    KIND = "topic"

    @staticmethod
    def name_of(config: TopicConfig) -> str:
        return config.topic_name

    @staticmethod
    def config_from_json(obj: Mapping[str, Any]) -> TopicConfig:
        return TopicConfig.from_json(obj)

    def update_with_attributes(self, config: TopicConfig, changes: Mapping[str, str | None]) -> TopicConfig:
        """Create or replace ``config``'s entry with the attributes its current entry has
        (none for a new topic) changed by ``changes`` (``topicattributes.alter_attributes``:
        ``config.attributes`` is ignored); persist and return what is stored.

        Raises ``TopicAttributeError`` (a ValueError) for a change that may not be made and
        ``MessageIllegalError`` for an invalid config (nothing changes then), ``StoreError``
        when the file cannot be written (as ``update``).  Holding the table's lock from read
        to write, two changes to one topic never lose each other's attributes.
        """
        name = config.topic_name
        with self._lock:
            current = self._table.get(name)
            attributes = alter_attributes(
                current.attributes if current is not None else {}, changes, create=current is None
            )
            stored = dataclasses.replace(config, attributes=attributes)
            self._validate(stored)
            self._table[name] = stored
            self._data_version.next_version(self._clock())
        self.persist()
        return stored
