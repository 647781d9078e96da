"""Topic configs as values: queue counts, permission bits and attributes (RocketMQ
``TopicConfig`` and ``PermName``).

The broker stores them (``broker_core.broker.topics.TopicConfigManager``, in
``topics.json``), the admin client sends them in UPDATE_AND_CREATE_TOPIC and reads them
back, and the producer checks the write bit of a route's ``perm``.  The JSON form uses
RocketMQ's camelCase field names::

    {"topicName": "<topic>", "readQueueNums": 16, "writeQueueNums": 16, "perm": 6,
     "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": false,
     "attributes": {"message.type": "FIFO"}}

``attributes`` (``broker_core.model.topicattributes``) is written only when the topic has
some; absent, the topic has none and each attribute means its default (``message.type``:
NORMAL), as in RocketMQ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict, TypeGuard

from broker_core.model.jsonfields import json_bool, json_int, json_object, json_str
from broker_core.model.messagetype import DEFAULT_MESSAGE_TYPE
from broker_core.model.topicattributes import MESSAGE_TYPE_ATTRIBUTE, attribute_problem
from broker_core.topics import topic_problem

# Permission bits (RocketMQ PermName).
PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
PERM_MAX = 15  # every bit set

DEFAULT_READ_QUEUE_NUMS = 16
DEFAULT_WRITE_QUEUE_NUMS = 16
MAX_QUEUE_NUMS = 1024

TopicFilterType = Literal["SINGLE_TAG", "MULTI_TAG"]
TOPIC_FILTER_TYPES: frozenset[str] = frozenset({"SINGLE_TAG", "MULTI_TAG"})
TopicName = str


def is_topic_filter_type(value: str) -> TypeGuard[TopicFilterType]:
    """Whether ``value`` is a filter type RocketMQ knows (``TOPIC_FILTER_TYPES``)."""
    return value in TOPIC_FILTER_TYPES


def is_readable(perm: int) -> bool:
    return perm & PERM_READ == PERM_READ


def is_writeable(perm: int) -> bool:
    return perm & PERM_WRITE == PERM_WRITE


def is_inherited(perm: int) -> bool:
    return perm & PERM_INHERIT == PERM_INHERIT


class TopicConfigJson(TypedDict):
    topicName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicFilterType: str
    topicSysFlag: int
    order: bool
    attributes: NotRequired[dict[str, str]]


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One topic's queue counts and permissions.

    Producers write to queues ``0 .. write_queue_nums-1``; consumers are given queues
    ``0 .. read_queue_nums-1``.  ``perm`` is a set of ``PERM_*`` bits.  ``attributes``
    are RocketMQ 5's topic attributes (a copy of what is given; treat it as read-only):
    ``message_type`` reads ``message.type``.  They take no part in the hash.
    """

    topic_name: TopicName
    read_queue_nums: int = DEFAULT_READ_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_WRITE_QUEUE_NUMS
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: TopicFilterType = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", dict(self.attributes))

    @property
    def message_type(self) -> str:
        """The topic's ``message.type`` (NORMAL when it has none, as RocketMQ reads it)."""
        return self.attributes.get(MESSAGE_TYPE_ATTRIBUTE) or DEFAULT_MESSAGE_TYPE

    @property
    def readable(self) -> bool:
        return is_readable(self.perm)

    @property
    def writeable(self) -> bool:
        return is_writeable(self.perm)

    def problem(self) -> str | None:
        """Return why this config may not be stored, or None when it may."""
        name_problem = topic_problem(self.topic_name)
        if name_problem is not None:
            return name_problem
        counts = (("readQueueNums", self.read_queue_nums), ("writeQueueNums", self.write_queue_nums))
        for label, count in counts:
            if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_QUEUE_NUMS:
                return f"{label} of topic {self.topic_name!r} must be 1..{MAX_QUEUE_NUMS}, not {count!r}"
        if isinstance(self.perm, bool) or not isinstance(self.perm, int) or not 0 <= self.perm <= PERM_MAX:
            return f"perm of topic {self.topic_name!r} must be 0..{PERM_MAX}, not {self.perm!r}"
        if self.topic_filter_type not in TOPIC_FILTER_TYPES:
            return f"topicFilterType of topic {self.topic_name!r} must be SINGLE_TAG or MULTI_TAG"
        for key, value in self.attributes.items():
            if not isinstance(key, str) or not isinstance(value, str):
                return f"attributes of topic {self.topic_name!r} must map strings to strings"
            problem = attribute_problem(key, value)
            if problem is not None:
                return f"attribute of topic {self.topic_name!r}: {problem}"
        return None

    def to_json(self) -> TopicConfigJson:
        obj: TopicConfigJson = {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
        }
        if self.attributes:
            obj["attributes"] = dict(self.attributes)
        return obj

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TopicConfig:
        """Build from RocketMQ's camelCase JSON; absent fields take their defaults.

        Raises ``ValueError`` for a field of the wrong type or an unknown filter type.
        Unknown keys are ignored; ``attributes`` (null or absent: none) must map strings to
        strings.
        """
        filter_type = json_str(obj, "topicFilterType", "SINGLE_TAG")
        if not is_topic_filter_type(filter_type):
            raise ValueError(f"topicFilterType must be SINGLE_TAG or MULTI_TAG, not {filter_type!r}")
        attributes = json_object(obj, "attributes") if obj.get("attributes") is not None else {}
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in attributes.items()):
            raise ValueError("attributes must map strings to strings")
        return cls(
            topic_name=json_str(obj, "topicName"),
            read_queue_nums=json_int(obj, "readQueueNums", DEFAULT_READ_QUEUE_NUMS),
            write_queue_nums=json_int(obj, "writeQueueNums", DEFAULT_WRITE_QUEUE_NUMS),
            perm=json_int(obj, "perm", PERM_READ | PERM_WRITE),
            topic_filter_type=filter_type,
            topic_sys_flag=json_int(obj, "topicSysFlag", 0),
            order=json_bool(obj, "order", False),
            attributes=attributes,
        )
