"""A consumer group's pop consumption: how RocketMQ 5 clients consume (through the gRPC
proxy), read from every master's pop books (QUIVER_GET_POP_STATUS via
``AdminClient.pop_status``).

A pop hands a message out and hides it for an invisible time instead of moving an offset:
the figures a person watches are the messages in flight (handed out, not acked yet), the
acks per second, how many came back for another attempt or went to the DLQ, and how the
messages in flight spread over delivery attempts (many on attempt 3 or more: the consumer
keeps failing them).  A FIFO group (``consumeMessageOrderly``) also holds messages behind
their message group's one in flight.
"""

from __future__ import annotations

from typing import TypedDict

from broker_core.client.admin import AdminClient
from broker_core.client.adminmodels import PopGroupTotals
from broker_core.errors import AdminError
from broker_core.remoting.codes import ResponseCode
from console.groups.services import group_known, stored_fifo


class AttemptCount(TypedDict):
    """Messages in flight on one delivery attempt (1: the first delivery)."""

    attempt: int
    messages: int


class PopSummary(TypedDict):
    """A group's pop figures summed over its queues on every master; ``ackedTps`` is acks
    per second over the last minute, the counters count since each broker started."""

    inFlight: int
    held: int
    acked: int
    redelivered: int
    deadLettered: int
    ackedTps: float
    attempts: list[AttemptCount]


class PopQueueRow(TypedDict):
    """The group's pop consumption of one queue: offsets below ``baseOffset`` are finished,
    ``cursorOffset`` is the next one to hand out."""

    topic: str
    brokerName: str
    queueId: int
    baseOffset: int
    cursorOffset: int
    inFlight: int
    held: int
    acked: int
    redelivered: int
    deadLettered: int
    attempts: list[AttemptCount]


class GroupPop(PopSummary):
    """One group's pop consumption: ``popping`` when any master has a pop book of it,
    ``fifo`` for a FIFO group, its figures, each queue's, and the masters asked."""

    group: str
    popping: bool
    fifo: bool
    queues: list[PopQueueRow]
    brokers: list[str]


def summary(totals: PopGroupTotals) -> PopSummary:
    """A group's summed figures as the group list and the group page show them."""
    full = totals.to_json()
    return {
        "inFlight": full["inFlight"],
        "held": full["held"],
        "acked": full["acked"],
        "redelivered": full["redelivered"],
        "deadLettered": full["deadLettered"],
        "ackedTps": full["ackedTps"],
        "attempts": full["attempts"],
    }


async def group_pop(admin: AdminClient, group: str) -> GroupPop:
    """``group``'s pop consumption on every master, summed and per queue.

    A group no master has a pop book of is answered with zeros (``popping`` false; its FIFO
    flag then from its stored config) when the cluster knows it.

    Raises:
        AdminError: SUBSCRIPTION_GROUP_NOT_EXIST for a group the cluster does not know; a
            master refused or did not answer.
    """
    status = await admin.pop_status(group)
    totals = status.groups().get(group)
    if totals is None:
        if not await group_known(admin, group):
            raise AdminError(
                f"no consumer group {group!r} on any broker", code=ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            )
        totals = PopGroupTotals(group, fifo=await stored_fifo(admin, group))
    queues: list[PopQueueRow] = []
    for book in status.books:
        if book.group != group:
            continue
        row = book.to_json()
        queues.append(
            {
                "topic": row["topic"],
                "brokerName": row["brokerName"],
                "queueId": row["queueId"],
                "baseOffset": row["baseOffset"],
                "cursorOffset": row["cursorOffset"],
                "inFlight": row["inFlight"],
                "held": row["held"],
                "acked": row["acked"],
                "redelivered": row["redelivered"],
                "deadLettered": row["deadLettered"],
                "attempts": row["attempts"],
            }
        )
    return {
        "group": group,
        "popping": bool(queues),
        "fifo": totals.fifo,
        **summary(totals),
        "queues": queues,
        "brokers": [b.broker_name for b in status.brokers],
    }
