"""Consumer offsets: how far each consumer group has got in each queue (RocketMQ
``ConsumerOffsetManager``).

Clients commit their progress every few seconds; the broker answers offset queries from
this table and a periodic job persists it to ``<store root>/config/consumerOffset.json``::

    {
      "dataVersion": {"counter": 12, "timestamp": 1700000000000},
      "offsetTable": {"<topic>@<group>": {"<queueId>": <next offset to consume>, ...}, ...}
    }

The ``topic@group`` key is RocketMQ's, which is why neither name may contain ``@``.  The
Java broker writes queue ids unquoted (``{0:5}``); both forms load.  ``dataVersion`` is
absent from older Java files and then starts at zero.

Thread-safe: every method takes the instance's lock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker_core.clock import wall_clock_ms as now_ms
from broker_core.errors import MessageIllegalError
from broker_core.model.jsonfields import json_object
from broker_core.store.configfile import (
    Clock,
    ConfigFile,
    DataVersion,
    config_path,
)
from broker_core.topics import group_problem, topic_problem

log = logging.getLogger(__name__)

CONSUMER_OFFSET_FILE = "consumerOffset.json"
TOPIC_GROUP_SEPARATOR = "@"

TopicAtGroup = str
"""An offset-table key: ``<topic>@<group>``."""
QueueId = int
Offset = int


class ConsumerOffsetManager(ConfigFile):
    """The committed consume offset of every (group, topic, queue) this broker has seen."""

    def __init__(self, store_root: str | os.PathLike[str], *, clock: Clock = now_ms) -> None:
        super().__init__()
        self._path = config_path(store_root, CONSUMER_OFFSET_FILE)
        self._clock = clock
        self._table: dict[TopicAtGroup, dict[QueueId, Offset]] = {}
        self._data_version = DataVersion(0, clock())

    @property
    def config_file_path(self) -> Path:
        return self._path

    @property
    def offset_table(self) -> dict[TopicAtGroup, dict[QueueId, Offset]]:
        """A copy of the whole table."""
        with self._lock:
            return {key: dict(queues) for key, queues in self._table.items()}

    @property
    def data_version(self) -> DataVersion:
        """A copy of the version, which moves on every change to the table."""
        with self._lock:
            return self._data_version.copy()

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record that ``group`` will next consume ``offset`` in ``topic``'s queue ``queue_id``.

        ``client_host`` only names the committer in the log line written when an offset
        moves backwards (allowed: a reset does that).  Raises ``MessageIllegalError`` for
        an invalid group or topic name, or a negative queue id or offset.
        """
        _check_name("group", group)
        _check_name("topic", topic)
        _check_number("queue id", queue_id)
        _check_number("offset", offset)
        key = topic + TOPIC_GROUP_SEPARATOR + group
        with self._lock:
            queues = self._table.setdefault(key, {})
            previous = queues.get(queue_id)
            if previous == offset:
                return
            queues[queue_id] = offset
            self._changed()
        if previous is not None and offset < previous:
            log.warning(
                "offset of %s queue %d moved back from %d to %d (committed by %s)",
                key,
                queue_id,
                previous,
                offset,
                client_host,
            )

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """Return the committed offset, or -1 when the group never committed one there."""
        with self._lock:
            queues = self._table.get(topic + TOPIC_GROUP_SEPARATOR + group)
            if queues is None:
                return -1
            return queues.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[QueueId, Offset]:
        """Return a copy of the group's offsets in ``topic`` by queue id ({} when none)."""
        with self._lock:
            return dict(self._table.get(topic + TOPIC_GROUP_SEPARATOR + group, {}))

    def which_topics_by_consumer_group(self, group: str) -> set[str]:
        """Topics in which ``group`` has committed offsets."""
        with self._lock:
            return {pair[0] for key in self._table if (pair := _split_key(key)) and pair[1] == group}

    def which_groups_by_topic(self, topic: str) -> set[str]:
        """Groups that have committed offsets in ``topic``."""
        with self._lock:
            return {pair[1] for key in self._table if (pair := _split_key(key)) and pair[0] == topic}

    def remove_consumer_group(self, group: str) -> int:
        """Forget every offset of ``group``; return how many topics it had offsets in."""
        return self._remove(lambda _topic, g: g == group)

    def remove_topic(self, topic: str) -> int:
        """Forget every group's offsets in ``topic``; return how many groups had some."""
        return self._remove(lambda t, _group: t == topic)

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> bool:
        """Give ``dest_group`` a copy of ``src_group``'s offsets in ``topic``.

        Returns False (and changes nothing) when ``src_group`` has none there.  Raises
        ``MessageIllegalError`` for an invalid ``dest_group`` or ``topic``.
        """
        _check_name("group", dest_group)
        _check_name("topic", topic)
        with self._lock:
            source = self._table.get(topic + TOPIC_GROUP_SEPARATOR + src_group)
            if source is None:
                return False
            self._table[topic + TOPIC_GROUP_SEPARATOR + dest_group] = dict(source)
            self._changed()
            return True

    def encode(self) -> dict[str, Any]:
        return {
            "dataVersion": self._data_version.to_json(),
            "offsetTable": {
                key: {str(queue_id): self._table[key][queue_id] for queue_id in sorted(self._table[key])}
                for key in sorted(self._table)
            },
        }

    def decode(self, obj: dict[str, Any]) -> None:
        table: dict[TopicAtGroup, dict[QueueId, Offset]] = {}
        for key, queues in json_object(obj, "offsetTable").items():
            if not isinstance(queues, dict):
                raise ValueError(f"offsets of {key!r} must be a JSON object")
            table[key] = {int(queue_id): _offset_from_json(key, value) for queue_id, value in queues.items()}
        if "dataVersion" in obj:
            version = DataVersion.from_json(json_object(obj, "dataVersion"))
        else:
            version = DataVersion(0, self._clock())
        self._table = table
        self._data_version = version

    def _remove(self, doomed: Callable[[str, str], bool]) -> int:
        with self._lock:
            keys = [key for key in self._table if (pair := _split_key(key)) and doomed(*pair)]
            for key in keys:
                del self._table[key]
            if keys:
                self._changed()
            return len(keys)

    def _changed(self) -> None:
        self._data_version.next_version(self._clock())


def _split_key(key: TopicAtGroup) -> tuple[str, str] | None:
    """Return (topic, group), or None for a key with more or fewer than one "@".

    Such keys can only come from a hand-edited file; like RocketMQ, they match nothing.
    """
    parts = key.split(TOPIC_GROUP_SEPARATOR)
    return (parts[0], parts[1]) if len(parts) == 2 else None


def _check_name(kind: str, name: object) -> None:
    if isinstance(name, str) and TOPIC_GROUP_SEPARATOR in name:
        raise MessageIllegalError(
            f"the {kind} name {name!r} contains '@', which separates topic from group in consumer offsets"
        )
    problem = group_problem(name) if kind == "group" else topic_problem(name)
    if problem is not None:
        raise MessageIllegalError(problem)


def _check_number(kind: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MessageIllegalError(f"the {kind} must be a non-negative integer, not {value!r}")


def _offset_from_json(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"offset in {key!r} must be an integer, not {value!r}")
    return value
