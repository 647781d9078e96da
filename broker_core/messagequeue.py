"""MessageQueue: one queue of a topic on one broker, the unit of routing, offsets and stats.

RocketMQ names a queue by (topic, brokerName, queueId).  Admin bodies (topic stats,
consume stats, reset offset) use it as a map key, which fastjson writes as a JSON object
in key position; ``broker_core.remoting.fastjson`` reads and writes that form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """A queue of ``topic`` on ``broker_name``; ordered by topic, broker, then queue id."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's field names, in fastjson's (alphabetical) order."""
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> MessageQueue:
        """Build from ``{"topic", "brokerName", "queueId"}``; ValueError when one is missing or wrong."""
        try:
            topic, broker_name, queue_id = obj["topic"], obj["brokerName"], obj["queueId"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a MessageQueue: {obj!r}") from exc
        if not isinstance(topic, str) or not isinstance(broker_name, str):
            raise ValueError(f"not a MessageQueue: {obj!r}")
        if isinstance(queue_id, bool) or not isinstance(queue_id, int | str):
            raise ValueError(f"not a MessageQueue: {obj!r}")
        return cls(topic, broker_name, int(queue_id))

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}:{self.queue_id}"
