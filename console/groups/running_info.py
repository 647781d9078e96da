"""A consumer's running info (GET_CONSUMER_RUNNING_INFO) as tables a person reads: its
properties, its subscriptions, what it holds per queue and its per-topic consume status.

Clients answer in fastjson's dialect (queues as object keys), which standard JSON readers
refuse; ``broker_core.remoting.fastjson`` reads it.  Epoch-millisecond times become UTC
date-times; the whole answer is also kept pretty-printed, for whoever wants every byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from broker_core.messagequeue import MessageQueue
from broker_core.remoting.fastjson import FastjsonError, loads
from console.maintenance.templatetags.maintenance_extras import epoch_ms

# The per-queue figures RocketMQ clients report, in the order the table shows them.
QUEUE_COLUMNS: dict[str, str] = {
    "commitOffset": "Committed offset",
    "cachedMsgCount": "Messages held",
    "cachedMsgSizeInMiB": "Held (MiB)",
    "cachedMsgMinOffset": "Lowest held offset",
    "cachedMsgMaxOffset": "Highest held offset",
    "locked": "Locked",
    "droped": "Dropped",  # sic: RocketMQ's field name
    "lastPullTimestamp": "Last pull",
    "lastConsumeTimestamp": "Last consumed",
    "lastLockTimestamp": "Last locked",
}
# A Java client's per-topic figures (statusTable).
STATUS_COLUMNS: dict[str, str] = {
    "pullRT": "Pull time (ms)",
    "pullTPS": "Pulls / s",
    "consumeRT": "Consume time (ms)",
    "consumeOKTPS": "Consumed / s",
    "consumeFailedTPS": "Failed / s",
    "consumeFailedMsgs": "Failed in the last hour",
}


@dataclass
class RunningInfo:
    """The tables of the page; ``problem`` says why the answer could not be read as tables."""

    properties: list[tuple[str, str]] = field(default_factory=list)
    subscriptions: list[dict[str, str]] = field(default_factory=list)
    queue_columns: list[str] = field(default_factory=list)
    queues: list[dict[str, Any]] = field(default_factory=list)
    status_columns: list[str] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    pretty: str = ""
    problem: str = ""


def _is_time(name: str) -> bool:
    return name.lower().endswith("timestamp")


def readable(name: str, value: Any) -> str:
    """A value as text: times (fields named ``…Timestamp``) as UTC date-times, booleans as
    yes/no, numbers with thousands separators, lists joined, None as ''."""
    if value is None:
        return ""
    if _is_time(name):
        try:
            millis = int(value)
        except (TypeError, ValueError):
            return str(value)
        return epoch_ms(millis) or "never"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    if isinstance(value, list | tuple | set):
        return ", ".join(readable("", v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _plain(value: Any) -> Any:
    """The parsed answer as standard JSON data (queue keys as ``topic@broker:queue`` text)."""
    if isinstance(value, dict):
        return {str(k) if isinstance(k, MessageQueue | tuple) else k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _queue_of(key: Any) -> tuple[str, str, str]:
    if isinstance(key, MessageQueue):
        return key.topic, key.broker_name, str(key.queue_id)
    return str(key), "", ""


def running_info(text: str) -> RunningInfo:
    """The tables of a client's answer ``text``; only ``pretty`` (the text) and ``problem``
    when it is not JSON in either dialect."""
    try:
        parsed = loads(text)
    except FastjsonError as exc:
        return RunningInfo(
            pretty=text, problem=f"The client's answer is not JSON this console can read ({exc})."
        )
    if not isinstance(parsed, dict):
        return RunningInfo(pretty=text, problem="The client's answer is not a JSON object.")
    info = RunningInfo(pretty=json.dumps(_plain(parsed), indent=2, ensure_ascii=False, sort_keys=True))
    properties = parsed.get("properties") or {}
    if isinstance(properties, dict):
        info.properties = [(str(k), readable(str(k), v)) for k, v in sorted(properties.items())]
    for sub in parsed.get("subscriptionSet") or []:
        if isinstance(sub, dict):
            info.subscriptions.append(
                {
                    "topic": str(sub.get("topic", "")),
                    "expression": str(sub.get("subString", "") or "*"),
                    "type": str(sub.get("expressionType", "TAG")),
                    "version": str(sub.get("subVersion", "")),
                }
            )
    table = parsed.get("mqTable") or {}
    if isinstance(table, dict):
        seen = {name for row in table.values() if isinstance(row, dict) for name in row}
        names = [n for n in QUEUE_COLUMNS if n in seen] + sorted(seen - set(QUEUE_COLUMNS))
        info.queue_columns = [QUEUE_COLUMNS.get(n) or n for n in names]
        for key, row in sorted(table.items(), key=lambda item: _queue_of(item[0])):
            topic, broker, queue = _queue_of(key)
            values = row if isinstance(row, dict) else {}
            info.queues.append(
                {
                    "topic": topic,
                    "broker": broker,
                    "queue": queue,
                    "cells": [readable(n, values.get(n)) for n in names],
                }
            )
    statuses = parsed.get("statusTable") or {}
    if isinstance(statuses, dict) and statuses:
        seen = {name for row in statuses.values() if isinstance(row, dict) for name in row}
        names = [n for n in STATUS_COLUMNS if n in seen] + sorted(seen - set(STATUS_COLUMNS))
        info.status_columns = [STATUS_COLUMNS.get(n) or n for n in names]
        for topic, row in sorted(statuses.items(), key=lambda item: str(item[0])):
            values = row if isinstance(row, dict) else {}
            info.statuses.append({"topic": str(topic), "cells": [readable(n, values.get(n)) for n in names]})
    return info
