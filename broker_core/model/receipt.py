"""A popped message's receipt handle: which hand-out of which message an ack names.

The broker's POP_MESSAGE answer gives the pop time and invisible time of the batch; each
message's handle is built from those and the message's own queue and offset, in the field
order of RocketMQ's ``extraInfo`` (``ExtraInfoUtil``)::

    "<ck offset> <pop time> <invisible time> <revive queue> <topic type> <broker name> <queue id> <offset>"

Quiver keeps no separate check-point queue: the ck offset is the message's offset and the
revive queue is 0.  The topic type is 0 for a message of the topic itself (RocketMQ uses
1 for its retry topic).  ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME carry the handle as
``extraInfo``; the gRPC proxy hands it to RocketMQ 5 clients as their ``receipt_handle``.
RocketMQ 5's proxy appends the message's commit-log offset as a ninth field to the handle
it gives its clients (so a message can be sent to the DLQ by that offset); ``encode``
writes it when known, ``extra_info`` never, and ``decode`` reads either.
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
    commit_log_offset: int = -1

    def extra_info(self) -> str:
        """The eight fields brokers take as ``extraInfo``."""
        return (
            f"{self.offset} {self.pop_time} {self.invisible_ms} 0 {self.topic_type} "
            f"{self.broker_name} {self.queue_id} {self.offset}"
        )

    def encode(self) -> str:
        """The handle as clients hold it: ``extra_info`` and the commit-log offset if known."""
        if self.commit_log_offset < 0:
            return self.extra_info()
        return f"{self.extra_info()} {self.commit_log_offset}"

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        parts = text.split(" ")
        commit_log_offset = -1
        if len(parts) == 9:
            tail = parts.pop()
            if not tail.isdigit():
                raise ReceiptHandleError(f"a receipt handle's commit-log offset does not parse: {text!r}")
            commit_log_offset = int(tail)
        if len(parts) != 8:
            raise ReceiptHandleError(
                f"a receipt handle has 8 or 9 space-separated fields, not {len(parts)}: {text!r}"
            )
        try:
            _ck, pop_time, invisible, _revive, topic_type, _queue, queue_id, offset = (
                int(p) if i != 5 else 0 for i, p in enumerate(parts)
            )
        except ValueError as exc:
            raise ReceiptHandleError(f"a receipt handle's numbers do not parse: {text!r}") from exc
        if not parts[5]:
            raise ReceiptHandleError(f"a receipt handle names no broker: {text!r}")
        return cls(parts[5], queue_id, offset, pop_time, invisible, topic_type, commit_log_offset)
