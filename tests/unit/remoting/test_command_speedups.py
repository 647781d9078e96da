"""The C frame decoder (``_speedups.decode_command``) against the Python one it speeds up.

The C decoder takes the usual JSON-header frames and hands everything else back (None) to
``command._decode``'s Python path.  Whatever it does take, it must decode exactly as the
Python path does; whatever the Python path refuses (a FrameError), it must hand back.  And
it must really take the frames clients send, or it would be a speedup only on paper.
"""

from __future__ import annotations

import contextlib
import json
import struct
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.remoting import command
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import FrameError, RemotingCommand, decode, encode
from broker_core.remoting.headers import SendMessageRequestHeader, SendMessageResponseHeader
from tests.unit.remoting.conftest import CAPTURES, frame_of

speedups = pytest.importorskip("broker_core._speedups")


@contextlib.contextmanager
def python_only() -> Iterator[None]:
    saved, command._c_decode = command._c_decode, None
    try:
        yield
    finally:
        command._c_decode = saved


def python_decode(frame: bytes) -> RemotingCommand | FrameError:
    """What the Python path makes of ``frame`` (without its length prefix)."""
    with python_only():
        try:
            return decode(frame)
        except FrameError as exc:
            return exc


def c_decode(frame: bytes) -> RemotingCommand | None:
    return speedups.decode_command(frame, 0, len(frame), RemotingCommand)  # type: ignore[no-any-return]


def agrees(frame: bytes) -> RemotingCommand | None:
    """Check the C decoder against the Python one on ``frame``; return what C decoded."""
    fast, slow = c_decode(frame), python_decode(frame)
    if isinstance(slow, FrameError):
        assert fast is None, f"C decoded a frame Python refuses ({slow}): {fast!r}"
    elif fast is not None:
        assert fast == slow
        assert [type(v) for v in vars_of(fast)] == [type(v) for v in vars_of(slow)]
    return fast


def vars_of(cmd: RemotingCommand) -> list[Any]:
    return [
        cmd.code,
        cmd.language,
        cmd.version,
        cmd.opaque,
        cmd.flag,
        cmd.remark,
        cmd.body,
        cmd.serialize_type,
    ]


def header_frame(header: bytes | str, body: bytes = b"") -> bytes:
    """A JSON-header frame without its length prefix (a str header's lone surrogates become
    the invalid UTF-8 a careless encoder would write)."""
    raw = header.encode("utf-8", "surrogatepass") if isinstance(header, str) else header
    return struct.pack(">I", len(raw)) + raw + body


def test_it_is_the_decoder_in_use_unless_switched_off() -> None:
    from broker_core.speedups import pure_python_requested

    assert (command._c_decode is not None) is not pure_python_requested()


def test_it_takes_our_clients_send_and_the_brokers_answer() -> None:
    header = SendMessageRequestHeader(
        "G",
        "Orders",
        properties="UNIQ_KEY\x01AC11\x02TAGS\x01新\x02",
        queue_id=3,
        born_timestamp=1_700_000_000_000,
    )
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_fields(), b"\x00body\xff")
    request.opaque = 41
    response = request.response(
        ResponseCode.SUCCESS, 'ok "quoted" \\ \n', SendMessageResponseHeader("AC11", 3, 9).to_fields()
    )
    for cmd in (request, response):
        frame = encode(cmd)[4:]
        fast = agrees(frame)
        assert fast == cmd, "the usual frames must be decoded in C"


def all_captured_frames() -> list[bytes]:
    frames = []
    for path in sorted(CAPTURES.glob("*.jsonl")) if CAPTURES.exists() else []:
        for text in path.read_text(encoding="utf-8").splitlines():
            if not text.strip():
                continue
            line = json.loads(text)
            if "hdr_word_hex" in line and "header_raw" in line:
                frames.append(frame_of(line)[0])
    return frames


def test_it_decodes_every_captured_frame_as_python_does() -> None:
    frames = all_captured_frames()
    if not frames:
        pytest.skip(f"no captures under {CAPTURES}")
    taken = [agrees(frame) for frame in frames]
    json_frames = [f for f in frames if f[0] == 0]
    assert sum(t is not None for t in taken) == len(json_frames), "every captured JSON frame is taken"


@pytest.mark.parametrize(
    "header",
    [
        '{"code":10,"extFields":{"a":"\\u0001\\u0002\\ud83d\\ude00\\/\\b\\f\\n\\r\\t\\"\\\\"}}',
        '{"code":10,"extFields":{"queueId":3,"sysFlag":-1,"batch":true,"unit":false,"gone":null}}',
        '{"code":10,"language":"CPP","version":0,"opaque":5,"flag":0}\n',
        ' \t\r\n{ "code" : 10 , "remark" : null , "extFields" : null } \n',
        '{"code":10,"serializeTypeCurrentRPC":"JSON","x":[1,{"y":[true,null]}],"z":{}}',
        '{"code":10,"remark":"caf\u00e9 \u2028"}',
        '{"code":-1,"opaque":-2147483648,"flag":2147483647}',
    ],
)
def test_it_takes_the_shapes_clients_write(header: str) -> None:
    assert agrees(header_frame(header, b"tail")) is not None


@pytest.mark.parametrize(
    "header",
    [
        b'{"code":10,"code":11}',  # duplicate member
        b'{"code":10,"extFields":{"a":"1","a":"2"}}',  # duplicate key
        b'{"code":10,"extFields":{"a":null,"a":"2"}}',
        b'{"code":"10"}',  # a string code: Python refuses it
        b'{"code":10.0}',
        b'{"code":10,"opaque":1e3}',
        b'{"code":10,"version":"4.9"}',  # Python reads a non-integer version as 0
        b'{"code":10,"language":1}',  # a language given as its code: Python names it
        b'{"code":10,"remark":5}',
        b'{"code":10,"extFields":{"a":1.5}}',
        b'{"code":10,"extFields":{"a":[1]}}',
        b'{"code":10,"extFields":[]}',
        b'{"code":12345678901234567890}',
        b'{"code":010}',
        b'{"opaque":1}',  # no code
        b'{"code":10,}',
        b'{"code":10} x',
        b'{"code":10,"remark":"\\ud800"}',  # lone surrogate
        b'{"code":10,"remark":"\\udc00x"}',
        b'{"code":10,"remark":"\xff"}',  # not UTF-8
        b'{"code":10,"remark":"\xed\xa0\x80"}',  # an encoded surrogate
        b'{"code":10,"remark":"a\tb"}',  # raw control character
        b'{"code":10,"remark":"\\x41"}',  # bad escape
        b'{"code":10,"remark":"\\u12"}',
        b'{"code":10,"x":' + b"[" * 40 + b"]" * 40 + b"}",  # deeper than the C decoder goes
        b"[1]",
        b"",
        b"{",
    ],
)
def test_it_hands_back_what_is_unusual_or_wrong(header: bytes) -> None:
    frame = header_frame(header)
    assert c_decode(frame) is None
    agrees(frame)  # and Python decides: a command, or a FrameError


def test_it_hands_back_binary_headers_and_frames_that_lie_about_their_header() -> None:
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, {"a": "b"}, b"x")
    cmd.serialize_type = 1
    assert c_decode(encode(cmd)[4:]) is None
    assert c_decode(struct.pack(">I", 500) + b'{"code":1}') is None
    assert c_decode(b"\x00\x00") is None
    frame = header_frame('{"code":1}', b"body")
    assert speedups.decode_command(frame, 0, len(frame) + 1, RemotingCommand) is None
    assert speedups.decode_command(frame, -1, len(frame), RemotingCommand) is None


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
member_names = st.sampled_from(["code", "language", "version", "opaque", "flag", "remark", "extFields", "x"])


@settings(max_examples=600, deadline=None)
@given(
    members=st.lists(
        st.tuples(
            member_names,
            st.one_of(
                json_values,
                st.integers(-(2**31), 2**31),
                st.dictionaries(st.text(max_size=6), json_scalars, max_size=4),
            ),
        ),
        max_size=8,
    ),
    code=st.integers(0, 400),
    spaces=st.sampled_from(["", " ", "\n", "\t\r\n "]),
    ascii_only=st.booleans(),
    body=st.binary(max_size=16),
)
def test_any_json_header_decodes_as_python_decodes_it_or_is_handed_back(
    members: list[tuple[str, Any]], code: int, spaces: str, ascii_only: bool, body: bytes
) -> None:
    parts = [f'"code"{spaces}:{spaces}{code}'] + [
        f"{json.dumps(name)}:{spaces}{json.dumps(value, ensure_ascii=ascii_only)}" for name, value in members
    ]
    agrees(header_frame(spaces + "{" + f",{spaces}".join(parts) + "}" + spaces, body))


@settings(max_examples=300, deadline=None)
@given(
    code=st.integers(-32768, 32767),
    language=st.text(max_size=8),
    opaque=st.integers(-(2**31), 2**31 - 1),
    remark=st.one_of(st.none(), st.text(max_size=20)),
    fields=st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=6),
    body=st.binary(max_size=32),
)
def test_every_command_we_encode_is_taken_and_decoded_as_python_decodes_it(
    code: int, language: str, opaque: int, remark: str | None, fields: dict[str, str], body: bytes
) -> None:
    cmd = RemotingCommand(code, language, 401, opaque, 0, remark, fields, body)
    try:
        frame = encode(cmd)[4:]
    except (TypeError, ValueError, orjson.JSONEncodeError):
        return  # lone surrogates: orjson refuses them, nothing to decode
    assert agrees(frame) == cmd


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=120), st.binary(max_size=8))
def test_random_header_bytes_never_decode_differently(header: bytes, body: bytes) -> None:
    agrees(header_frame(b"{" + header, body))
    agrees(header_frame(header, body))
