"""fastjson's JSON dialect, as RocketMQ's admin bodies use it on the wire.

Java brokers and tools serialise several admin bodies (topic stats, consume stats, reset
offset results) with a map keyed by ``MessageQueue``; fastjson writes such a key as a JSON
object in key position: ``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}}``.
Route data may carry bare integer keys (``{0:"127.0.0.1:10911"}``).  Neither is standard
JSON, yet Java tools expect exactly that form, so Quiver writes it and reads it back.

This module is the one owner of that dialect: ``dumps`` writes it (``MessageQueue`` keys
as objects), ``loads`` reads it (object keys become ``MessageQueue`` where they are one,
bare numbers become strings).  Standard JSON goes through orjson untouched.
"""

from __future__ import annotations

import re

# The JSON string scanner that json.decoder.scanstring names (the C one on CPython); typed
# here, where json.decoder's stub does not declare it.
from _json import scanstring
from collections.abc import Mapping
from typing import Any

import orjson

from broker_core.messagequeue import MessageQueue

__all__ = ["dumps", "loads", "FastjsonError"]


class FastjsonError(ValueError):
    """The bytes are neither JSON nor fastjson's dialect; the message says where."""


# -- writing -------------------------------------------------------------------------------


def dumps(obj: Any) -> bytes:
    """Serialise ``obj``; ``MessageQueue`` keys and values are written as JSON objects."""
    out: list[bytes] = []
    _write(obj, out)
    return b"".join(out)


def _write(obj: Any, out: list[bytes]) -> None:
    if isinstance(obj, Mapping):
        out.append(b"{")
        for index, (key, value) in enumerate(obj.items()):
            if index:
                out.append(b",")
            if isinstance(key, MessageQueue):
                out.append(orjson.dumps(key.to_json()))
            else:
                out.append(orjson.dumps(str(key)))
            out.append(b":")
            _write(value, out)
        out.append(b"}")
    elif isinstance(obj, list | tuple | set | frozenset):
        out.append(b"[")
        for index, item in enumerate(obj):
            if index:
                out.append(b",")
            _write(item, out)
        out.append(b"]")
    elif isinstance(obj, MessageQueue):
        out.append(orjson.dumps(obj.to_json()))
    else:
        out.append(orjson.dumps(obj))


# -- reading -------------------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}
_MAX_DEPTH = 64


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse standard JSON or fastjson's dialect.

    Object keys that are objects become ``MessageQueue`` when they have its three fields
    (otherwise a sorted tuple of their items, still hashable); bare number keys become
    strings.  Raises ``FastjsonError`` for anything else that is not JSON.
    """
    raw = bytes(data) if isinstance(data, bytearray | memoryview) else data
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise FastjsonError(f"not UTF-8: {exc}") from None
    parser = _Parser(text)
    value = parser.value(0)
    parser.skip_ws()
    if parser.pos != len(text):
        parser.fail("trailing data")
    return value


class _Parser:
    """A small recursive-descent reader; only used when orjson refuses the text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> None:
        raise FastjsonError(f"{what} at character {self.pos}")

    def skip_ws(self) -> None:
        # Cannot fail to match: the pattern matches the empty string too.
        match = _WS.match(self.text, self.pos)
        if match is not None:
            self.pos = match.end()

    def value(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            self.fail("nesting too deep")
        self.skip_ws()
        if self.pos >= len(self.text):
            self.fail("unexpected end")
        char = self.text[self.pos]
        if char == "{":
            return self.object(depth)
        if char == "[":
            return self.array(depth)
        if char == '"':
            return self.string()
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return literal
        return self.number()

    def string(self) -> str:
        try:
            value, self.pos = scanstring(self.text, self.pos + 1)
        except ValueError as exc:
            raise FastjsonError(str(exc)) from None
        return value

    def number(self) -> int | float:
        match = _NUMBER.match(self.text, self.pos)
        if match is None or not match.group(0):
            self.fail("unexpected character")
        assert match is not None
        self.pos = match.end()
        token = match.group(0)
        return float(token) if match.group(1) or match.group(2) else int(token)

    def key(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            self.fail("nesting too deep")
        self.skip_ws()
        if self.pos < len(self.text) and self.text[self.pos] == "{":
            obj = self.object(depth)
            try:
                return MessageQueue.from_json(obj)
            except ValueError:
                return tuple(sorted((k, _hashable(v)) for k, v in obj.items()))
        if self.pos < len(self.text) and self.text[self.pos] == '"':
            return self.string()
        return str(self.number())

    def object(self, depth: int) -> dict[Any, Any]:
        self.pos += 1
        result: dict[Any, Any] = {}
        self.skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return result
        while True:
            key = self.key(depth + 1)
            self.skip_ws()
            if not self.text.startswith(":", self.pos):
                self.fail("expected ':'")
            self.pos += 1
            result[key] = self.value(depth + 1)
            self.skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.text.startswith("}", self.pos):
                self.pos += 1
                return result
            else:
                self.fail("expected ',' or '}'")

    def array(self, depth: int) -> list[Any]:
        self.pos += 1
        result: list[Any] = []
        self.skip_ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return result
        while True:
            result.append(self.value(depth + 1))
            self.skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.text.startswith("]", self.pos):
                self.pos += 1
                return result
            else:
                self.fail("expected ',' or ']'")


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value
