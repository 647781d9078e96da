"""Message traces as RocketMQ's clients write them (``enableMsgTrace``), read back for the
console: records in the trace topic (``RMQ_SYS_TRACE_TOPIC`` by default), found by the
message's id through the key index.

A trace message's body holds records separated by ``\\x02``, each a ``\\x01``-separated line
whose first field names its kind; the field order per kind is RocketMQ's:

* ``Pub``: time, region, producer group, topic, msgId, tags, keys, store host, body length,
  cost (ms), message type, [offset msgId], success, [client host]
* ``SubBefore``: time, region, consumer group, request id, msgId, retry times, keys
* ``SubAfter``: request id, msgId, cost (ms), success, keys, [context code, time, group]
* ``EndTransaction``: time, region, producer group, topic, msgId, tags, keys, store host,
  message type, transaction id, state, from a check-back
"""

from __future__ import annotations

from typing import Any

CONTENT = "\x01"
FIELD = "\x02"
DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


def _int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def _published(line: list[str]) -> dict[str, Any]:
    """The fields a Pub and an EndTransaction record both begin with, in this order."""
    return {
        "type": line[0],
        "timestamp": _int(line[1]),
        "region": line[2],
        "group": line[3],
        "topic": line[4],
        "msgId": line[5],
        "tags": line[6],
        "keys": line[7],
        "storeHost": line[8],
    }


def parse_records(body: str) -> list[dict[str, Any]]:
    """Every record of one trace message body (records of unknown kinds are skipped)."""
    records = []
    for chunk in body.split(FIELD):
        line = chunk.split(CONTENT)
        kind = line[0]
        try:
            if kind == "Pub":
                record = {
                    **_published(line),
                    "bodyLength": _int(line[9]),
                    "costMs": _int(line[10]),
                    "msgType": _int(line[11]),
                }
                if len(line) == 13:
                    record["success"] = line[12] == "true"
                elif len(line) >= 14:
                    record.update(offsetMsgId=line[12], success=line[13] == "true")
                if len(line) >= 15:
                    record["clientHost"] = line[14]
            elif kind == "SubBefore":
                record = {
                    "type": kind,
                    "timestamp": _int(line[1]),
                    "region": line[2],
                    "group": line[3],
                    "requestId": line[4],
                    "msgId": line[5],
                    "retryTimes": _int(line[6]),
                    "keys": line[7],
                }
            elif kind == "SubAfter":
                record = {
                    "type": kind,
                    "requestId": line[1],
                    "msgId": line[2],
                    "costMs": _int(line[3]),
                    "success": line[4] == "true",
                    "keys": line[5],
                }
                if len(line) >= 7:
                    record["contextCode"] = _int(line[6])
                if len(line) >= 9:
                    record.update(timestamp=_int(line[7]), group=line[8])
            elif kind == "EndTransaction":
                record = {
                    **_published(line),
                    "msgType": _int(line[9]),
                    "transactionId": line[10],
                    "transactionState": line[11],
                    "fromCheck": line[12] == "true",
                }
            else:
                continue
        except IndexError:
            continue  # a truncated record: not shown rather than shown wrong
        records.append(record)
    return records


def trace_of(msg_id: str, bodies: list[str]) -> dict[str, Any]:
    """The message's journey: its publication(s), and per consumer group each attempt
    (``SubBefore`` joined to its ``SubAfter`` by request id) with cost and outcome."""
    records = [r for body in bodies for r in parse_records(body) if r.get("msgId") == msg_id]
    publish = [r for r in records if r["type"] in ("Pub", "EndTransaction")]
    afters = {r["requestId"]: r for r in records if r["type"] == "SubAfter"}
    consumers: dict[str, list[dict[str, Any]]] = {}
    for before in (r for r in records if r["type"] == "SubBefore"):
        after = afters.get(before["requestId"], {})
        consumers.setdefault(before["group"], []).append(
            {
                "startedAt": before["timestamp"],
                "retryTimes": before["retryTimes"],
                "costMs": after.get("costMs"),
                "success": after.get("success"),
                "finished": bool(after),
            }
        )
    for attempts in consumers.values():
        attempts.sort(key=lambda a: a["startedAt"] or 0)
    return {"msgId": msg_id, "publish": publish, "consumers": consumers, "records": len(records)}
