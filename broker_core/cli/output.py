"""How admin results are shown: aligned text tables for people, JSON for programs.

A command returns an ``Output``: the JSON value (``--json``) and the text a person reads.
Both are built from the same result, so they never disagree.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from broker_core.cli.args import format_timestamp
from broker_core.model.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
)


@dataclass(frozen=True, slots=True)
class Output:
    """One command's result: ``data`` for ``--json``, ``text`` for a terminal."""

    data: Any
    text: str

    def render(self, as_json: bool) -> str:
        if as_json:
            return orjson.dumps(self.data, option=orjson.OPT_INDENT_2).decode()
        return self.text


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns, two spaces apart, headers first (mqadmin's ``#Name`` style)."""
    cells = [[str(h) for h in headers], *([_cell(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def key_values(pairs: Iterable[tuple[str, Any]], separator: str = ": ") -> str:
    """``key: value`` lines with the keys padded to one width."""
    items = [(str(k), _cell(v)) for k, v in pairs]
    width = max((len(k) for k, _ in items), default=0)
    return "\n".join(f"{k.ljust(width)}{separator}{v}" for k, v in items)


# -- messages --------------------------------------------------------------------------------


def body_json(body: bytes) -> dict[str, str]:
    """A body for JSON: UTF-8 text when it is text, else base64, saying which."""
    try:
        return {"body": body.decode("utf-8"), "bodyEncoding": "utf-8"}
    except UnicodeDecodeError:
        return {"body": base64.b64encode(body).decode("ascii"), "bodyEncoding": "base64"}


def message_json(msg: MessageExt) -> dict[str, Any]:
    """A stored message with every header field, its properties and its body."""
    return {
        "msgId": msg.msg_id,
        "uniqueKey": msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        "topic": msg.topic,
        "tags": msg.properties.get(PROPERTY_TAGS),
        "keys": msg.properties.get(PROPERTY_KEYS),
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "reconsumeTimes": msg.reconsume_times,
        "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp,
        "bornHost": msg.born_host,
        "storeHost": msg.store_host,
        "sysFlag": msg.sys_flag,
        "bodyCrc": msg.body_crc,
        "storeSize": msg.store_size,
        "properties": dict(sorted(msg.properties.items())),
        **body_json(msg.uncompressed_body()),
    }


def message_text(msg: MessageExt) -> str:
    """mqadmin's message detail: one labelled line per field, then the body."""
    body = body_json(msg.uncompressed_body())
    return key_values(
        [
            ("OffsetID", msg.msg_id),
            ("Unique Key", msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)),
            ("Topic", msg.topic),
            ("Tags", msg.properties.get(PROPERTY_TAGS)),
            ("Keys", msg.properties.get(PROPERTY_KEYS)),
            ("Queue ID", msg.queue_id),
            ("Queue Offset", msg.queue_offset),
            ("CommitLog Offset", msg.commit_log_offset),
            ("Reconsume Times", msg.reconsume_times),
            ("Born Timestamp", format_timestamp(msg.born_timestamp)),
            ("Store Timestamp", format_timestamp(msg.store_timestamp)),
            ("Born Host", msg.born_host),
            ("Store Host", msg.store_host),
            ("System Flag", msg.sys_flag),
            ("Properties", _properties_text(msg.properties)),
            (f"Body ({body['bodyEncoding']})", body["body"]),
        ]
    )


def _properties_text(properties: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(properties.items())) or "-"
