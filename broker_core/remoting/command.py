"""The remoting frame: ``RemotingCommand`` and its codec, as pure functions over bytes.

Frame layout (all integers big-endian)::

    +--------------+--------------------+-------------+------+
    | total length | header-length word | header      | body |
    | int32        | int32              | H bytes     | rest |
    +--------------+--------------------+-------------+------+
    total length       = 4 + H + len(body)   (counts everything after itself)
    header-length word = (serializeType << 24) | H

Header, serialize type 0 (JSON), one object::

    {"code": int, "language": "CPP", "version": int, "opaque": int, "flag": int,
     "remark": str (omitted when None), "extFields": {str: str}}

Header, serialize type 1 (ROCKETMQ binary)::

    code int16 | language uint8 | version int16 | opaque int32 | flag int32
    | remark length R int32 (0 = None) | remark R bytes UTF-8
    | extFields length E int32 | E bytes of (key length int16, key, value length int32, value)*

Wire quirks honoured (reference §1.4, §10): the C++ client sends some extFields values as
JSON numbers and ends its header with ``\\n`` (both accepted; values become ``str``); it
reads only JSON-string extFields values and crashes on a SEND response without
``extFields``, so encoding always writes ``extFields`` as an object of strings.  A response
uses the request's serialize type, so a C++ client (JSON only) always gets JSON.

Pure: no asyncio, no I/O.  ``FrameDecoder`` instances are not thread-safe (one per
connection).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from broker_core.remoting.codes import (
    QUIVER_VERSION,
    RPC_ONEWAY,
    RPC_TYPE,
    LanguageCode,
    ResponseCode,
    SerializeType,
)
from broker_core.remoting.errors import FrameError
from broker_core.speedups import compiled

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "FrameDecoder",
    "FrameError",
    "RemotingCommand",
    "decode",
    "encode",
]

DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024
"""Largest frame accepted, 4-byte length prefix included (Java's ``frameMaxLength``)."""

_HEADER_LENGTH_MASK = 0xFFFFFF
_PREFIX = struct.Struct(">II")  # total length, header-length word
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
_BINARY_FIXED = struct.Struct(">hBhiii")  # code, language, version, opaque, flag, remark length
_BINARY_MIN = _BINARY_FIXED.size + 4  # ... plus the extFields length

_LANGUAGE_BY_CODE = {member.value: member.name for member in LanguageCode}
_LANGUAGE_CODES = {member.name: member.value for member in LanguageCode}
_JSON = int(SerializeType.JSON)
_ROCKETMQ = int(SerializeType.ROCKETMQ)
_EMPTY = b""

# The C decoder (``_speedups.decode_command``) takes the usual JSON-header frames and hands
# every other one back (None) to ``_decode``'s Python path, which is the reference and owns
# every error; None here without the compiled module.  Encoding is orjson's either way.
_c_decode: Callable[..., RemotingCommand | None] | None = (
    None if compiled is None else compiled.decode_command
)


@dataclass(slots=True)
class RemotingCommand:
    """One request or response: the header fields, the custom header (``ext_fields``) and the body.

    ``opaque`` pairs a response with its request; ``flag`` bit 0 marks a response, bit 1 a
    oneway request.  ``language`` is the LanguageCode name (``"CPP"``, ``"JAVA"``...).
    """

    code: int
    language: str = "PYTHON"
    version: int = QUIVER_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = field(default=b"", repr=False)
    serialize_type: int = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """Return whether flag bit 0 (RPC_TYPE) is set."""
        return bool(self.flag & RPC_TYPE)

    @property
    def is_oneway(self) -> bool:
        """Return whether flag bit 1 (RPC_ONEWAY) is set: the sender wants no response."""
        return bool(self.flag & RPC_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
    ) -> RemotingCommand:
        """Return a new request; the connection assigns ``opaque`` when it sends it."""
        if ext_fields is None:
            fields: dict[str, str] = {}
        else:
            fields = ext_fields if type(ext_fields) is dict else dict(ext_fields)
        return cls(code, ext_fields=fields, body=body, flag=RPC_ONEWAY if oneway else 0)

    def response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """Return the answer to this request: same opaque and serialize type, response flag set.

        It echoes the request's ``version``, as the C++ client does in its own answers.
        """
        if ext_fields is None:
            fields: dict[str, str] = {}
        else:
            fields = ext_fields if type(ext_fields) is dict else dict(ext_fields)
        return RemotingCommand(
            code,
            "PYTHON",
            self.version,
            self.opaque,
            self.flag | RPC_TYPE,
            remark,
            fields,
            body,
            self.serialize_type,
        )


# -- encoding ---------------------------------------------------------------------------


def encode(cmd: RemotingCommand) -> bytes:
    """Return the whole frame for ``cmd``, 4-byte total length included.

    Raises:
        ValueError: unknown serialize type, or a header longer than 2**24 - 1 bytes.
    """
    serialize_type = cmd.serialize_type
    if serialize_type == _JSON:
        header = _encode_json_header(cmd)
    elif serialize_type == _ROCKETMQ:
        header = _encode_binary_header(cmd)
    else:
        raise ValueError(f"unknown serialize type {serialize_type}")
    header_length = len(header)
    if header_length > _HEADER_LENGTH_MASK:
        raise ValueError(f"header of {header_length} bytes does not fit the 24-bit length")
    body = cmd.body
    prefix = _PREFIX.pack(4 + header_length + len(body), (serialize_type << 24) | header_length)
    if body:
        return b"".join((prefix, header, body))
    return prefix + header


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    header: dict[str, Any] = {
        "code": cmd.code,
        "language": cmd.language,
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    # Always present, always strings: the C++ client skips non-string values and crashes
    # on some responses without the object.
    header["extFields"] = _string_fields(cmd.ext_fields)
    return orjson.dumps(header)


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    remark = cmd.remark.encode() if cmd.remark else _EMPTY
    parts = [
        _BINARY_FIXED.pack(
            cmd.code,
            _LANGUAGE_CODES.get(cmd.language, LanguageCode.OTHER),
            cmd.version,
            cmd.opaque,
            cmd.flag,
            len(remark),
        ),
        remark,
        _EMPTY,  # extFields length, filled in below
    ]
    fields_length = 0
    for key, value in _string_fields(cmd.ext_fields).items():
        raw_key = key.encode()
        raw_value = value.encode()
        parts.append(_U16.pack(len(raw_key)) + raw_key + _I32.pack(len(raw_value)) + raw_value)
        fields_length += 6 + len(raw_key) + len(raw_value)
    parts[2] = _I32.pack(fields_length)
    return b"".join(parts)


def _string_fields(ext_fields: Mapping[str, Any]) -> Mapping[str, str]:
    """Return ``ext_fields`` with every value a str (None values dropped), copying only if needed."""
    for value in ext_fields.values():
        if type(value) is not str:
            return {str(k): _to_str(v) for k, v in ext_fields.items() if v is not None}
    return ext_fields


def _to_str(value: object) -> str:
    """Return the Java-style text of a header value (``True`` -> ``"true"``, ``5`` -> ``"5"``)."""
    if type(value) is int:
        return str(value)
    if type(value) is str:
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(int(value))  # IntEnum members too: their number, not their name
    return str(value)


# -- decoding ---------------------------------------------------------------------------


def decode(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """Return the command in one frame given WITHOUT its 4-byte total-length prefix.

    Raises:
        FrameError: the bytes are not a valid frame.
    """
    view = frame if type(frame) is memoryview else memoryview(frame)
    if len(view) < 4:
        raise FrameError(f"frame of {len(view)} bytes has no header-length word")
    return _decode(view, 0, len(view))


def _decode(view: memoryview, start: int, end: int) -> RemotingCommand:
    """Decode the frame in ``view[start:end]`` (header-length word first, prefix excluded)."""
    if _c_decode is not None:
        cmd = _c_decode(view, start, end, RemotingCommand)
        if cmd is not None:
            return cmd
    (word,) = _U32.unpack_from(view, start)
    header_length = word & _HEADER_LENGTH_MASK
    header_start = start + 4
    header_end = header_start + header_length
    if header_end > end:
        raise FrameError(f"header length {header_length} exceeds the frame ({end - header_start} bytes)")
    serialize_type = word >> 24
    try:
        if serialize_type == _JSON:
            cmd = _decode_json_header(view[header_start:header_end])
        elif serialize_type == _ROCKETMQ:
            cmd = _decode_binary_header(view, header_start, header_end)
            cmd.serialize_type = _ROCKETMQ
        else:
            raise FrameError(f"unknown serialize type {serialize_type}")
    except FrameError:
        raise
    except Exception as exc:  # any parse failure of peer bytes is a bad frame, nothing else
        raise FrameError(f"malformed header: {exc}") from exc
    if header_end < end:
        cmd.body = view[header_end:end].tobytes()
    return cmd


def _decode_json_header(raw: memoryview) -> RemotingCommand:
    header = orjson.loads(raw)  # trailing whitespace (the C++ "\n") is valid JSON
    if type(header) is not dict:
        raise FrameError("JSON header is not an object")
    code = header["code"]
    opaque = header.get("opaque", 0)
    flag = header.get("flag", 0)  # missing flag: a request, as the C++ client reads it
    version = header.get("version", 0)
    if type(code) is not int or type(opaque) is not int or type(flag) is not int:
        raise FrameError("JSON header code, opaque and flag must be integers")
    if type(version) is not int:
        version = 0
    language = header.get("language", "OTHER")
    if type(language) is not str:
        language = _LANGUAGE_BY_CODE.get(language, "OTHER") if type(language) is int else "OTHER"
    remark = header.get("remark")
    if remark is not None and type(remark) is not str:
        remark = _to_str(remark)
    ext_fields = header.get("extFields")
    if ext_fields is None:
        ext_fields = {}
    elif type(ext_fields) is not dict:
        raise FrameError("JSON header extFields is not an object")
    else:
        dropped = None
        for key, value in ext_fields.items():
            if type(value) is not str:
                # The C++ client sends queueId, sysFlag, maxMsgNums... as numbers.  Replacing
                # the value of an existing key is safe while iterating; deleting is not.
                if value is None:
                    dropped = [key] if dropped is None else [*dropped, key]
                else:
                    ext_fields[key] = _to_str(value)
        if dropped is not None:
            for key in dropped:
                del ext_fields[key]
    return RemotingCommand(code, language, version, opaque, flag, remark, ext_fields)


def _decode_binary_header(view: memoryview, start: int, end: int) -> RemotingCommand:
    if end - start < _BINARY_MIN:
        raise FrameError(f"binary header of {end - start} bytes is too short")
    code, language, version, opaque, flag, remark_length = _BINARY_FIXED.unpack_from(view, start)
    pos = start + _BINARY_FIXED.size
    if remark_length < 0 or pos + remark_length + 4 > end:
        raise FrameError(f"binary header remark length {remark_length} is out of range")
    remark = str(view[pos : pos + remark_length], "utf-8") if remark_length else None
    pos += remark_length
    (fields_length,) = _I32.unpack_from(view, pos)
    pos += 4
    fields_end = pos + fields_length
    if fields_length < 0 or fields_end > end:
        raise FrameError(f"binary header extFields length {fields_length} is out of range")
    ext_fields: dict[str, str] = {}
    raw = view[pos:fields_end].tobytes()  # indexing bytes is far cheaper than struct per field
    pos, size = 0, len(raw)
    while pos < size:
        if pos + 2 > size:
            raise FrameError("binary header extFields entry is truncated")
        key_end = pos + 2 + ((raw[pos] << 8) | raw[pos + 1])
        if key_end + 4 > size:
            raise FrameError("binary header extFields key is truncated")
        value_start = key_end + 4
        value_end = value_start + int.from_bytes(raw[key_end:value_start], "big", signed=True)
        if value_end < value_start or value_end > size:
            raise FrameError("binary header extFields value is truncated")
        ext_fields[raw[pos + 2 : key_end].decode()] = raw[value_start:value_end].decode()
        pos = value_end
    return RemotingCommand(
        code, _LANGUAGE_BY_CODE.get(language, "OTHER"), version, opaque, flag, remark, ext_fields
    )


class FrameDecoder:
    """Split a byte stream into commands, many frames per ``feed``.

    Keeps one bytearray and a read offset: parsed frames are only skipped over, and the
    consumed prefix is dropped when the buffer empties or the offset passes 64 KiB, so
    feeding is linear in the bytes received.  A length prefix above ``max_frame_size`` is
    rejected as soon as its 4 bytes arrive, so a peer cannot make the buffer grow past one
    frame plus one read.  After a ``FrameError`` the decoder is unusable; close the
    connection.
    """

    __slots__ = ("_buffer", "_offset", "max_frame_size")

    _COMPACT_AT = 64 * 1024

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._offset = 0

    @property
    def buffered(self) -> int:
        """Return how many received bytes are not returned yet: a partial frame's (and, after
        a ``feed`` with ``most``, the whole frames it left)."""
        return len(self._buffer) - self._offset

    def reset(self) -> None:
        """Drop every buffered byte (the connection is being closed: free its memory now)."""
        self._buffer = bytearray()
        self._offset = 0

    def feed(self, data: bytes | bytearray | memoryview, most: int = -1) -> list[RemotingCommand]:
        """Append ``data`` and return every command now complete, in arrival order.

        With a positive ``most``, return at most that many; complete frames past it stay
        buffered (as bytes, unchecked) for the next ``feed``, ``feed(b"")`` included.  A
        server uses it to stop answering a peer whose answers back up.

        Raises:
            FrameError: a frame is malformed or larger than ``max_frame_size``; its
                ``commands`` are the complete frames decoded before the bad one.
        """
        buffer = self._buffer
        if not buffer and len(data) >= 8:
            # The usual read of a request-and-answer exchange: exactly one whole frame and
            # nothing before it.  Decoded straight from the read, with no copy into the buffer.
            (length,) = _U32.unpack_from(data, 0)
            if length + 4 == len(data) and 4 <= length <= self.max_frame_size - 4:
                view = data if type(data) is memoryview else memoryview(data)
                try:
                    return [_decode(view, 4, length + 4)]
                except FrameError as exc:
                    exc.commands = []
                    raise
        buffer += data
        offset = self._offset
        available = len(buffer)
        limit = self.max_frame_size - 4
        commands: list[RemotingCommand] = []
        view = memoryview(buffer)
        try:
            while available - offset >= 4:
                (length,) = _U32.unpack_from(buffer, offset)
                if length > limit:
                    raise FrameError(f"frame of {length + 4} bytes exceeds the {self.max_frame_size} limit")
                if length < 4:
                    raise FrameError(f"frame length {length} is shorter than its header-length word")
                frame_end = offset + 4 + length
                if frame_end > available:
                    break
                commands.append(_decode(view, offset + 4, frame_end))
                offset = frame_end
                if len(commands) == most:
                    break
        except FrameError as exc:
            exc.commands = commands
            raise
        finally:
            view.release()  # a bytearray with an exported view cannot be resized
        if offset == available:
            buffer.clear()
            offset = 0
        elif offset >= self._COMPACT_AT:
            del buffer[:offset]
            offset = 0
        self._offset = offset
        return commands
