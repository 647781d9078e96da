"""A popped message's receipt handle: which hand-out of which message an ack names.

The broker's POP_MESSAGE answer gives the pop time and invisible time of the batch; each
message's handle is built from those and the message's own queue and offset, in the field
order of RocketMQ's ``extraInfo`` (``ExtraInfoUtil``)::

    "<ck offset> <pop time> <invisible time> <revive queue> <topic type> <broker name> <queue id> <offset>"

Quiver keeps no separate check-point queue: the ck offset is the message's offset and the
revive queue is 0.  The topic type is 0 for a message of the topic itself (RocketMQ uses
1 for its retry topic).  ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME carry the handle as
``extraInfo``; the gRPC proxy hands it to RocketMQ 5 clients as their ``receipt_handle``.
The pop time is the hand-out's version: once the message has been handed out again (or
its invisible time changed, which answers a new handle) an older handle no longer acks it.
"""

from __future__ import annotations

from dataclasses import dataclass


class ReceiptHandleError(ValueError):
    """A string that is not a receipt handle."""


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    broker_name: str
    queue_id: int
    offset: int
    pop_time: int
    invisible_ms: int
    topic_type: int = 0

    def encode(self) -> str:
        return (
            f"{self.offset} {self.pop_time} {self.invisible_ms} 0 {self.topic_type} "
            f"{self.broker_name} {self.queue_id} {self.offset}"
        )

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        parts = text.split(" ")
        if len(parts) != 8:
            raise ReceiptHandleError(
                f"a receipt handle has 8 space-separated fields, not {len(parts)}: {text!r}"
            )
        try:
            _ck, pop_time, invisible, _revive, topic_type, _queue, queue_id, offset = (
                int(p) if i != 5 else 0 for i, p in enumerate(parts)
            )
        except ValueError as exc:
            raise ReceiptHandleError(f"a receipt handle's numbers do not parse: {text!r}") from exc
        if not parts[5]:
            raise ReceiptHandleError(f"a receipt handle names no broker: {text!r}")
        return cls(parts[5], queue_id, offset, pop_time, invisible, topic_type)
