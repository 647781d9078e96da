"""Headers of RocketMQ 5's pop consumption requests, with RocketMQ's field names.

POP_MESSAGE (200050) asks for up to ``maxMsgNums`` messages of a topic (``queueId`` -1: any
queue) to be handed out invisible for ``invisibleTime`` ms, holding the request up to
``pollTime`` ms when there are none; ``order`` asks for FIFO hand-out.  ACK_MESSAGE
(200051) and CHANGE_MESSAGE_INVISIBLETIME (200053) name one hand-out by its ``extraInfo``
(``broker_core.model.receipt``) and offset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker_core.remoting.headers import header_bool


def _required_int(fields: Mapping[str, str], name: str) -> int:
    raw = fields.get(name)
    if raw is None or raw == "":
        raise ValueError(f"{name} is required")
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, not {raw!r}") from exc


def _required_str(fields: Mapping[str, str], name: str) -> str:
    value = fields.get(name)
    if not value:
        raise ValueError(f"{name} is required")
    return value


@dataclass(frozen=True, slots=True)
class PopMessageRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int = -1
    max_msg_nums: int = 32
    invisible_time: int = 60_000
    poll_time: int = 0
    born_time: int = 0
    init_mode: int = 0
    exp_type: str = "TAG"
    exp: str = "*"
    order: bool = False

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> PopMessageRequestHeader:
        def optional_int(name: str, default: int) -> int:
            raw = fields.get(name)
            return default if raw in (None, "") else _required_int(fields, name)

        return cls(
            consumer_group=_required_str(fields, "consumerGroup"),
            topic=_required_str(fields, "topic"),
            queue_id=optional_int("queueId", -1),
            max_msg_nums=_required_int(fields, "maxMsgNums"),
            invisible_time=_required_int(fields, "invisibleTime"),
            poll_time=optional_int("pollTime", 0),
            born_time=optional_int("bornTime", 0),
            init_mode=optional_int("initMode", 0),
            exp_type=fields.get("expType") or "TAG",
            exp=fields.get("exp") or "*",
            order=header_bool(fields.get("order")),
        )

    def to_fields(self) -> dict[str, str]:
        return {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "maxMsgNums": str(self.max_msg_nums),
            "invisibleTime": str(self.invisible_time),
            "pollTime": str(self.poll_time),
            "bornTime": str(self.born_time),
            "initMode": str(self.init_mode),
            "expType": self.exp_type,
            "exp": self.exp,
            "order": "true" if self.order else "false",
        }


@dataclass(frozen=True, slots=True)
class PopMessageResponseHeader:
    """``startOffsetInfo`` / ``msgOffsetInfo`` list, per queue, where the hand-out began and
    the offsets handed out, in RocketMQ's text form (``"0 <queue> <offset>;..."`` and
    ``"0 <queue> <o1>,<o2>;..."``)."""

    pop_time: int
    invisible_time: int
    revive_qid: int = 0
    rest_num: int = 0
    start_offset_info: str = ""
    msg_offset_info: str = ""
    order_count_info: str = ""

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> PopMessageResponseHeader:
        return cls(
            pop_time=_required_int(fields, "popTime"),
            invisible_time=_required_int(fields, "invisibleTime"),
            revive_qid=int(fields.get("reviveQid") or 0),
            rest_num=int(fields.get("restNum") or 0),
            start_offset_info=fields.get("startOffsetInfo", ""),
            msg_offset_info=fields.get("msgOffsetInfo", ""),
            order_count_info=fields.get("orderCountInfo", ""),
        )

    def to_fields(self) -> dict[str, str]:
        return {
            "popTime": str(self.pop_time),
            "invisibleTime": str(self.invisible_time),
            "reviveQid": str(self.revive_qid),
            "restNum": str(self.rest_num),
            "startOffsetInfo": self.start_offset_info,
            "msgOffsetInfo": self.msg_offset_info,
            "orderCountInfo": self.order_count_info,
        }


@dataclass(frozen=True, slots=True)
class AckMessageRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: int

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> AckMessageRequestHeader:
        return cls(
            consumer_group=_required_str(fields, "consumerGroup"),
            topic=_required_str(fields, "topic"),
            queue_id=_required_int(fields, "queueId"),
            extra_info=_required_str(fields, "extraInfo"),
            offset=_required_int(fields, "offset"),
        )

    def to_fields(self) -> dict[str, str]:
        return {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "extraInfo": self.extra_info,
            "offset": str(self.offset),
        }


@dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: int
    invisible_time: int

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> ChangeInvisibleTimeRequestHeader:
        return cls(
            consumer_group=_required_str(fields, "consumerGroup"),
            topic=_required_str(fields, "topic"),
            queue_id=_required_int(fields, "queueId"),
            extra_info=_required_str(fields, "extraInfo"),
            offset=_required_int(fields, "offset"),
            invisible_time=_required_int(fields, "invisibleTime"),
        )

    def to_fields(self) -> dict[str, str]:
        return {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "extraInfo": self.extra_info,
            "offset": str(self.offset),
            "invisibleTime": str(self.invisible_time),
        }


@dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeResponseHeader:
    pop_time: int
    invisible_time: int
    revive_qid: int = 0

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> ChangeInvisibleTimeResponseHeader:
        return cls(
            pop_time=_required_int(fields, "popTime"),
            invisible_time=_required_int(fields, "invisibleTime"),
            revive_qid=int(fields.get("reviveQid") or 0),
        )

    def to_fields(self) -> dict[str, str]:
        return {
            "popTime": str(self.pop_time),
            "invisibleTime": str(self.invisible_time),
            "reviveQid": str(self.revive_qid),
        }
