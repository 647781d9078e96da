"""Message queries over broker_core's AdminClient.

Browsing a time range never stops silently: each page reads at most ``limit`` messages,
queue after queue, and returns a cursor of where every queue stands, the share of the
range scanned, and ``truncated`` while messages remain.  Key and id lookups use the
broker's index.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import orjson

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from broker_core.messagequeue import MessageQueue
from broker_core.store.message import MessageExt
from console.messages.bodies import body_views


def summary(msg: MessageExt) -> dict[str, Any]:
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


def detail(msg: MessageExt, charset: str = "utf-8") -> dict[str, Any]:
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
    try:
        state = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
        assert isinstance(state, dict) and isinstance(state["queues"], list)
        return state
    except Exception:
        raise AdminError("the cursor is not one this console issued") from None


async def browse(
    admin: AdminClient, topic: str, begin_ms: int, end_ms: int, limit: int, cursor: str | None
) -> dict[str, Any]:
    """One page of ``topic``'s messages stored within [begin_ms, end_ms]."""
    if cursor:
        state = decode_cursor(cursor)
        begin_ms, end_ms = state["begin"], state["end"]
    else:
        if end_ms < begin_ms:
            raise AdminError(f"the time range ends ({end_ms}) before it begins ({begin_ms})")
        starts, stops = await asyncio.gather(
            admin.offsets_by_time(topic, begin_ms), admin.offsets_by_time(topic, end_ms + 1)
        )
        queues = sorted(starts)
        state = {
            "begin": begin_ms,
            "end": end_ms,
            "queues": [
                [q.broker_name, q.queue_id, starts[q], stops.get(q, starts[q]), starts[q]] for q in queues
            ],
        }
    route = await admin.topic_route(topic)
    addrs = route.read_addrs()
    found: list[dict[str, Any]] = []
    for entry in state["queues"]:
        broker, queue_id, first, stop, at = entry
        if len(found) >= limit or at >= stop:
            continue
        addr = addrs.get(broker)
        if addr is None:
            raise AdminError(f"broker {broker!r} of {topic!r} has no readable address now")
        queue = MessageQueue(topic, broker, queue_id)
        messages, entry[4] = await admin.browse_queue(addr, queue, at, stop, limit - len(found))
        for msg in messages:
            if begin_ms <= msg.store_timestamp <= end_ms:
                row = summary(msg)
                row["brokerName"] = broker
                found.append(row)
    total = sum(e[3] - e[2] for e in state["queues"])
    scanned = sum(e[4] - e[2] for e in state["queues"])
    more = any(e[4] < e[3] for e in state["queues"])
    found.sort(key=lambda m: (m["storeTimestamp"], m["brokerName"], m["queueId"], m["queueOffset"]))
    return {
        "topic": topic,
        "begin": begin_ms,
        "end": end_ms,
        "messages": found,
        "scanned": scanned,
        "total": total,
        "progress": round(scanned / total, 4) if total else 1.0,
        "truncated": more,
        "cursor": encode_cursor(state) if more else None,
    }


async def find(admin: AdminClient, msg_id: str, topic: str | None) -> MessageExt:
    """A message by its offset msgId (store host + commit-log offset), or by its client msgId
    (UNIQ_KEY) within ``topic``."""
    try:
        return await admin.view_message(msg_id)
    except AdminError as exc:
        if not topic:
            raise
        found = await admin.query_by_unique_key(topic, msg_id)
        if not found:
            raise AdminError(f"no message {msg_id} in {topic}", code=22) from exc
        return found[0]
