"""What applications send and what a send returns (RocketMQ ``Message`` and ``SendResult``).

A ``Message`` carries a topic, a body, and properties: tags, keys, a delay level and the
user's own.  The reserved property names are RocketMQ's, so messages look the same to the
official clients and to the broker's index (keys, ``UNIQ_KEY``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from broker_core.messagequeue import MessageQueue
from broker_core.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)

KEY_SEPARATOR = " "


@dataclass
class Message:
    """One message to send.  ``keys`` are indexed by the broker (query by key)."""

    topic: str
    body: bytes
    tags: str | None = None
    keys: str | Iterable[str] | None = None
    delay_level: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0

    def wire_properties(self) -> dict[str, str]:
        """All properties as sent: the user's, then tags, keys and delay level."""
        props = dict(self.properties)
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.keys:
            props[PROPERTY_KEYS] = self.keys if isinstance(self.keys, str) else KEY_SEPARATOR.join(self.keys)
        if self.delay_level > 0:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(self.delay_level)
        return props

    @property
    def unique_id(self) -> str | None:
        """The client id the producer gave the message (``UNIQ_KEY``), once sent."""
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


class SendStatus(enum.Enum):
    """How the broker stored a message (RocketMQ ``SendStatus``)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class SendResult:
    """Where a message went: its client id (``msg_id``), the broker's offset id, queue and offset."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    def to_json(self) -> Mapping[str, object]:
        return {
            "sendStatus": self.status.value,
            "msgId": self.msg_id,
            "offsetMsgId": self.offset_msg_id,
            "messageQueue": self.queue.to_json(),
            "queueOffset": self.queue_offset,
        }
