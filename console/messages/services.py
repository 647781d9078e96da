"""Message queries over broker_core's AdminClient.

Browsing a time range shows the newest messages first, merged across the topic's queues,
and never stops silently: each page returns a cursor of where every queue stands, the
share of the range scanned, and ``truncated`` while messages remain.  Key and id lookups
use the broker's index (see ``console.messages.search``).  The one write action, having an
online consumer consume a message now (``resend_to_client``), checks, acts and audits here
for the page and the API alike (see ``console.core.actions``).
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field
from typing import Any, TypedDict

import orjson

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import MessageExt
from broker_core.tags import parse_tags
from console.audit.services import audited
from console.core.actions import Actor, require
from console.core.brokers import admin_call
from console.messages.bodies import body_views
from console.messages.times import epoch_text
from nameserver.clusters import ClusterRef

# At most this many messages are read for one page (a rare tag may leave it short, with a cursor).
SCAN_BUDGET = 5_000
# The fewest messages read from a queue at a time (one pull's batch).
MIN_CHUNK = 32


class MessageSummary(TypedDict):
    """What a list shows of a message; ``brokerName`` is None until the reader sets it."""

    msgId: str
    uniqKey: str | None
    topic: str
    brokerName: str | None
    queueId: int
    queueOffset: int
    tags: str | None
    keys: str | None
    bornTimestamp: int
    storeTimestamp: int
    bodySize: int
    reconsumeTimes: int


class MessageDetail(MessageSummary):
    """Everything about one message; ``body`` is ``body_views`` (text, JSON, hex)."""

    properties: dict[str, str]
    bornHost: str
    storeHost: str
    commitLogOffset: int
    sysFlag: int
    flag: int
    bodyCrc: int
    body: dict[str, Any]


class MessagePage(TypedDict):
    """One page of a time-range browse, newest first; ``cursor`` goes on (None at the end)."""

    topic: str
    begin: int
    end: int
    tags: str | None
    order: str
    messages: list[MessageSummary]
    scanned: int
    total: int
    progress: float
    truncated: bool
    cursor: str | None


def summary(msg: MessageExt) -> MessageSummary:
    """What a list shows of a message."""
    return {
        "msgId": msg.msg_id,
        "uniqKey": msg.properties.get("UNIQ_KEY"),
        "topic": msg.topic,
        "brokerName": None,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "tags": msg.properties.get("TAGS"),
        "keys": msg.properties.get("KEYS"),
        "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp,
        "bodySize": len(msg.body),
        "reconsumeTimes": msg.reconsume_times,
    }


def detail(msg: MessageExt, charset: str = "utf-8") -> MessageDetail:
    """Everything about one message: properties, hosts, times, flags and body views."""
    return {
        **summary(msg),
        "properties": dict(sorted(msg.properties.items())),
        "bornHost": msg.born_host,
        "storeHost": msg.store_host,
        "commitLogOffset": msg.commit_log_offset,
        "sysFlag": msg.sys_flag,
        "flag": msg.flag,
        "bodyCrc": msg.body_crc,
        "body": body_views(msg.body, charset),
    }


def encode_cursor(state: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(state)).decode()


def decode_cursor(cursor: str) -> dict[str, Any]:
    """The browse state a cursor carries; an AdminError (a 400) for one this console did not issue."""
    try:
        state = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
        assert isinstance(state, dict) and isinstance(state["queues"], list)
        assert isinstance(state["begin"], int) and isinstance(state["end"], int)
        assert state.get("tags") is None or isinstance(state["tags"], str)
        for entry in state["queues"]:
            assert isinstance(entry, list) and len(entry) == 5 and isinstance(entry[0], str)
            assert all(isinstance(v, int) for v in entry[1:])
        return state
    except Exception:
        raise AdminError(
            "the cursor is not one this console issued; start again from the first page"
        ) from None


@dataclass
class _Lane:
    """One queue of a browse: its range [first, stop), ``unread`` (what lies below has not
    been read yet) and ``ready``, the messages read and not yet shown, newest last."""

    broker: str
    queue_id: int
    first: int
    stop: int
    unread: int
    ready: list[MessageExt] = field(default_factory=list)

    @property
    def exhausted(self) -> bool:
        return not self.ready and self.unread <= self.first

    @property
    def resume(self) -> int:
        """Where the next page goes on from: everything at or above was shown or filtered out."""
        return self.ready[-1].queue_offset + 1 if self.ready else self.unread


class _Reader:
    """Reads lanes from their newest end in chunks, keeping what the filters let through."""

    def __init__(
        self,
        admin: AdminClient,
        topic: str,
        addrs: dict[str, str],
        begin_ms: int,
        end_ms: int,
        tags: frozenset[str] | None,
        chunk: int,
    ) -> None:
        self.admin, self.topic, self.addrs = admin, topic, addrs
        self.begin_ms, self.end_ms, self.tags, self.chunk = begin_ms, end_ms, tags, chunk
        self.read = 0

    def keeps(self, msg: MessageExt) -> bool:
        if not self.begin_ms <= msg.store_timestamp <= self.end_ms:
            return False
        return self.tags is None or (msg.tags or "") in self.tags

    async def fill(self, lane: _Lane) -> None:
        """Read chunks below ``lane.unread`` until something is kept, the lane ends or the
        page's read budget is spent."""
        addr = self.addrs.get(lane.broker)
        if addr is None:
            raise AdminError(f"broker {lane.broker!r} of {self.topic!r} has no readable address now")
        queue = MessageQueue(self.topic, lane.broker, lane.queue_id)
        while not lane.ready and lane.unread > lane.first and self.read < SCAN_BUDGET:
            low = max(lane.first, lane.unread - self.chunk)
            messages, _ = await self.admin.browse_queue(addr, queue, low, lane.unread, lane.unread - low)
            self.read += len(messages)
            lane.ready = sorted((m for m in messages if self.keeps(m)), key=lambda m: m.queue_offset)
            lane.unread = low


async def browse(
    admin: AdminClient,
    topic: str,
    begin_ms: int,
    end_ms: int,
    limit: int,
    cursor: str | None,
    *,
    tags: str | None = None,
) -> MessagePage:
    """One page of ``topic``'s messages stored within [begin_ms, end_ms], newest first,
    merged by store time across all its queues (a page is never one queue's alone).

    Each queue is read from its newest end; a message is shown only when every queue's
    next candidate is known, so the order holds across pages.  ``tags`` (``"A || B"``)
    keeps only messages with one of those tags.  A page reads at most SCAN_BUDGET messages:
    a rare tag may give a short page with a cursor to go on, never a silent stop.
    """
    if cursor:
        state = decode_cursor(cursor)
    else:
        if end_ms < begin_ms:
            raise AdminError(
                f"the time range ends ({epoch_text(end_ms)}) before it begins ({epoch_text(begin_ms)})"
            )
        starts, stops = await asyncio.gather(
            admin.offsets_by_time(topic, begin_ms), admin.offsets_by_time(topic, end_ms + 1)
        )
        state = {
            "begin": begin_ms,
            "end": end_ms,
            "tags": (tags or "").strip() or None,
            "queues": [
                [q.broker_name, q.queue_id, starts[q], stop, stop]
                for q in sorted(starts)
                for stop in [max(starts[q], stops.get(q, starts[q]))]
            ],
        }
    begin_ms, end_ms = state["begin"], state["end"]
    lanes = [_Lane(b, q, first, stop, at) for b, q, first, stop, at in state["queues"]]
    live = [lane for lane in lanes if lane.unread > lane.first]
    route = await admin.topic_route(topic)
    chunk = max(MIN_CHUNK, -(-limit // max(1, len(live))))
    reader = _Reader(admin, topic, route.read_addrs(), begin_ms, end_ms, parse_tags(state["tags"]), chunk)
    await asyncio.gather(*(reader.fill(lane) for lane in live))
    found: list[MessageSummary] = []
    while len(found) < limit:
        # Every unfinished queue must offer its next message before the newest is chosen.
        if any(not lane.ready and not lane.exhausted for lane in live):
            break  # the read budget is spent: the cursor goes on from here
        ready = [lane for lane in live if lane.ready]
        if not ready:
            break
        lane = max(ready, key=lambda x: (x.ready[-1].store_timestamp, x.broker, x.queue_id))
        msg = lane.ready.pop()
        row = summary(msg)
        row["brokerName"] = lane.broker
        found.append(row)
        if not lane.ready:
            await reader.fill(lane)
    for lane, entry in zip(lanes, state["queues"], strict=True):
        entry[4] = lane.resume
    total = sum(e[3] - e[2] for e in state["queues"])
    scanned = sum(e[3] - e[4] for e in state["queues"])
    more = any(e[4] > e[2] for e in state["queues"])
    return {
        "topic": topic,
        "begin": begin_ms,
        "end": end_ms,
        "tags": state["tags"],
        "order": "newest first",
        "messages": found,
        "scanned": scanned,
        "total": total,
        "progress": round(scanned / total, 4) if total else 1.0,
        "truncated": more,
        "cursor": encode_cursor(state) if more else None,
    }


def resend_to_client(
    actor: Actor, cluster: ClusterRef, msg_id: str, group: str, client_id: str
) -> dict[str, Any]:
    """Have ``client_id``, an online consumer of ``group``, consume the message ``msg_id``
    now (operators; audited ``message.resend``); the consumer's result as it reports it."""
    require(actor, cluster, "operate")
    if not group or not client_id:
        raise AdminError("give group and clientId (an online consumer of the group)")
    with audited(actor, "message.resend", cluster.name, f"{msg_id} -> {group}") as audit:
        result = admin_call(
            cluster.namesrv_addr, lambda admin: admin.consume_message_directly(group, client_id, msg_id)
        )
        audit.after = result
    return result
