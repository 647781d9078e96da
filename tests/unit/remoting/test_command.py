"""The frame codec against the C++ client's real frames, round trips and hostile bytes."""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.remoting.codes import QUIVER_VERSION, RequestCode, ResponseCode, SerializeType
from broker_core.remoting.command import FrameDecoder, FrameError, RemotingCommand, decode, encode
from tests.unit.remoting.conftest import captured_requests, frame_of

CPP_CAPTURES = ["producer-consumer-all.jsonl", "orderly-and-pull.jsonl", "compressed-bodies.jsonl"]


def json_header(frame: bytes) -> dict:
    """Return the JSON header of a whole encoded frame."""
    total, word = struct.unpack_from(">II", frame)
    assert total == len(frame) - 4
    assert word >> 24 == 0
    return orjson.loads(frame[8 : 8 + (word & 0xFFFFFF)])


def a_send_request() -> RemotingCommand:
    cmd = RemotingCommand.request(
        RequestCode.SEND_MESSAGE,
        {"topic": "TopicTest", "queueId": "3", "properties": "TAGS\x01a\x02KEYS\x01k\x02", "ünï": "cödé"},
        b"\x00\x01hello\xff",
    )
    cmd.opaque = 77
    cmd.remark = "a remark"
    return cmd


@pytest.mark.parametrize("capture", CPP_CAPTURES)
def test_it_decodes_every_request_the_cpp_client_sent(capture: str) -> None:
    lines = captured_requests(capture)
    assert lines
    for line in lines:
        frame, body = frame_of(line)
        cmd = decode(frame)
        raw = orjson.loads(line["header_raw"])
        assert line["header_raw"].endswith("\n")
        assert cmd.code == raw["code"]
        assert cmd.opaque == raw["opaque"]
        assert cmd.flag == raw["flag"]
        assert cmd.language == "CPP"
        assert cmd.version == raw["version"]  # 63, or the echoed version in its responses
        assert cmd.body == body
        assert cmd.serialize_type == SerializeType.JSON
        assert all(type(value) is str for value in cmd.ext_fields.values())
        assert set(cmd.ext_fields) == set(raw["extFields"])
        for key, value in raw["extFields"].items():
            assert cmd.ext_fields[key] == (value if isinstance(value, str) else str(value))


def test_it_coerces_numeric_and_boolean_ext_fields_to_strings() -> None:
    header = (
        b'{"code":11,"extFields":{"queueId":5,"maxMsgNums":32,"big":1795339936569,'
        b'"on":true,"off":false,"s":"x"},"opaque":9}\n'
    )
    cmd = decode(struct.pack(">I", len(header)) + header)
    assert cmd.ext_fields == {
        "queueId": "5",
        "maxMsgNums": "32",
        "big": "1795339936569",
        "on": "true",
        "off": "false",
        "s": "x",
    }
    assert cmd.flag == 0 and not cmd.is_response  # no flag: a request
    assert cmd.remark is None


def test_it_reads_the_send_header_numbers_of_the_first_captured_send() -> None:
    send = next(
        line
        for line in captured_requests("producer-consumer-all.jsonl")
        if '"code":10,' in line["header_raw"]
    )
    cmd = decode(frame_of(send)[0])
    assert cmd.ext_fields["queueId"] == "0"
    assert cmd.ext_fields["defaultTopicQueueNums"] == "4"
    assert cmd.ext_fields["sysFlag"] == "0"
    assert cmd.ext_fields["batch"] == "0"


def test_it_accepts_a_language_given_as_a_code_in_json() -> None:
    header = b'{"code":34,"language":9,"flag":0,"opaque":1}'
    assert decode(struct.pack(">I", len(header)) + header).language == "GO"


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_it_round_trips_a_request(serialize_type: SerializeType) -> None:
    cmd = a_send_request()
    cmd.serialize_type = serialize_type
    frame = encode(cmd)
    assert struct.unpack_from(">I", frame)[0] == len(frame) - 4
    assert struct.unpack_from(">I", frame, 4)[0] >> 24 == serialize_type
    assert decode(frame[4:]) == cmd


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_it_round_trips_a_response_without_remark_fields_or_body(serialize_type: SerializeType) -> None:
    request = RemotingCommand.request(RequestCode.HEART_BEAT)
    request.serialize_type = serialize_type
    response = request.response()
    decoded = decode(encode(response)[4:])
    assert decoded == response
    assert decoded.remark is None and decoded.ext_fields == {} and decoded.body == b""


def test_it_builds_responses_that_pair_with_their_request() -> None:
    request = RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO, "CPP", 63, 41, 0)
    request.serialize_type = SerializeType.ROCKETMQ
    response = request.response(ResponseCode.SYSTEM_ERROR, "no such group", {"k": "v"}, b"body")
    assert (response.opaque, response.version, response.serialize_type) == (41, 63, SerializeType.ROCKETMQ)
    assert response.is_response and not request.is_response
    assert response.flag == 1
    assert (response.code, response.remark, response.ext_fields, response.body) == (
        ResponseCode.SYSTEM_ERROR,
        "no such group",
        {"k": "v"},
        b"body",
    )


def test_it_marks_oneway_requests() -> None:
    cmd = RemotingCommand.request(
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g"}, oneway=True
    )
    assert cmd.is_oneway and cmd.flag == 2
    assert cmd.version == QUIVER_VERSION and cmd.language == "PYTHON"


def test_it_encodes_responses_with_string_ext_fields_and_always_an_ext_fields_object() -> None:
    request = RemotingCommand(RequestCode.SEND_MESSAGE, "CPP", 63, 5)
    bare = json_header(encode(request.response()))
    assert bare["extFields"] == {}
    assert "remark" not in bare
    assert bare["flag"] == 1 and bare["opaque"] == 5
    loose = request.response(
        ext_fields={"queueId": 0, "queueOffset": 12, "ok": True, "gone": None, "msgId": "AB"}
    )  # type: ignore[dict-item]
    fields = json_header(encode(loose))["extFields"]
    assert fields == {"queueId": "0", "queueOffset": "12", "ok": "true", "msgId": "AB"}
    assert all(type(value) is str for value in fields.values())


def test_it_writes_code_enums_as_numbers() -> None:
    header = json_header(encode(RemotingCommand(ResponseCode.TOPIC_NOT_EXIST, opaque=3, flag=1)))
    assert header["code"] == 17


def test_it_splits_a_stream_cut_at_every_byte_boundary() -> None:
    commands = [
        a_send_request(),
        RemotingCommand.request(RequestCode.HEART_BEAT),
        a_send_request().response(),
    ]
    commands[1].serialize_type = SerializeType.ROCKETMQ
    stream = b"".join(encode(cmd) for cmd in commands)
    for cut in range(len(stream) + 1):
        decoder = FrameDecoder()
        got = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        assert got == commands, cut
        assert decoder.buffered == 0


def test_it_splits_a_stream_fed_one_byte_at_a_time() -> None:
    commands = [a_send_request(), RemotingCommand.request(RequestCode.HEART_BEAT)]
    stream = b"".join(encode(cmd) for cmd in commands)
    decoder = FrameDecoder()
    got = []
    for i in range(len(stream)):
        got += decoder.feed(stream[i : i + 1])
    assert got == commands


def test_it_parses_many_frames_per_feed_and_keeps_a_partial_tail() -> None:
    frames = [
        encode(RemotingCommand(RequestCode.PULL_MESSAGE, opaque=i, body=b"x" * (i % 50))) for i in range(5000)
    ]
    stream = b"".join(frames)
    decoder = FrameDecoder()
    got = decoder.feed(stream[:-3])
    assert [cmd.opaque for cmd in got] == list(range(4999))
    assert decoder.buffered == len(frames[-1]) - 3
    assert [cmd.opaque for cmd in decoder.feed(stream[-3:])] == [4999]
    assert decoder.buffered == 0


def test_it_returns_at_most_as_many_commands_as_asked_and_keeps_the_rest_in_order() -> None:
    # A server takes a flooding peer's pipeline a few requests per turn (issue 14).
    frames = [encode(RemotingCommand(RequestCode.PULL_MESSAGE, opaque=i, body=b"x" * i)) for i in range(100)]
    decoder = FrameDecoder()
    got = decoder.feed(b"".join(frames) + frames[0][:5], 16)
    assert len(got) == 16
    while more := decoder.feed(b"", 16):
        assert len(more) <= 16
        got += more
    assert [cmd.opaque for cmd in got] == list(range(100))
    assert decoder.buffered == 5  # the partial frame behind them
    decoder.reset()
    assert decoder.buffered == 0
    assert [cmd.opaque for cmd in decoder.feed(frames[7])] == [7]


def test_a_read_of_exactly_one_frame_keeps_nothing_of_the_callers_buffer() -> None:
    # The request-and-answer path decodes such a read in place (issue 19): what it returns
    # must not change when the caller reads the next answer into the same buffer.
    reused = bytearray(encode(a_send_request()))
    decoder = FrameDecoder()
    (cmd,) = decoder.feed(memoryview(reused))
    reused[:] = b"\x00" * len(reused)
    assert (cmd.opaque, cmd.remark, cmd.body) == (77, "a remark", b"\x00\x01hello\xff")
    assert cmd.ext_fields["properties"] == "TAGS\x01a\x02KEYS\x01k\x02"
    assert decoder.buffered == 0
    bad = struct.pack(">II", 9, 5) + b"nope!"
    with pytest.raises(FrameError) as raised:
        FrameDecoder().feed(bad)
    assert raised.value.commands == []


def test_it_decodes_captured_frames_back_to_back() -> None:
    lines = captured_requests("producer-consumer-all.jsonl")
    stream = b"".join(struct.pack(">I", len(frame)) + frame for frame, _ in map(frame_of, lines))
    got = FrameDecoder().feed(stream)
    assert [cmd.opaque for cmd in got] == [orjson.loads(line["header_raw"])["opaque"] for line in lines]


def test_it_rejects_an_oversized_frame_from_its_length_prefix_alone() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(FrameError):
        decoder.feed(struct.pack(">I", 1021))
    assert FrameDecoder(max_frame_size=1024).feed(struct.pack(">I", 1020)) == []
    with pytest.raises(FrameError):
        FrameDecoder().feed(b"\x7f\xff\xff\xff")


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # length prefix 'GET ' is ~1.2 GB
        struct.pack(">II", 4, 0x02000000),  # serialize type 2
        struct.pack(">II", 8, 100) + b"abcd",  # header longer than the frame
        struct.pack(">I", 2) + b"ab",  # frame shorter than the header-length word
        struct.pack(">II", 9, 5) + b"nope!",  # not JSON
        struct.pack(">II", 7, 3) + b"[1]",  # JSON, not an object
        struct.pack(">II", 14, 10) + b'{"flag":0}',  # no code
        struct.pack(">II", 19, 15) + b'{"code":"ten"} ',  # code not an integer
        struct.pack(">II", 9, 0x01000005) + b"\x00\x01\x02\x03\x04",  # binary header too short
    ],
)
def test_it_raises_frame_error_on_garbage(garbage: bytes) -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(garbage)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_it_never_raises_anything_but_frame_error_on_random_bytes(data: bytes) -> None:
    decoder = FrameDecoder(max_frame_size=4096)
    try:
        decoder.feed(data)
    except FrameError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=4, max_size=200))
def test_it_never_raises_anything_but_frame_error_decoding_random_frames(data: bytes) -> None:
    for serialize_type in (0, 1):
        frame = struct.pack(">I", (serialize_type << 24) | min(len(data) - 4, 0xFFFFFF)) + data[4:]
        try:
            decode(frame)
        except FrameError:
            pass


@settings(max_examples=200, deadline=None)
@given(
    code=st.integers(0, 32767),
    opaque=st.integers(0, 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.one_of(st.none(), st.text(min_size=1, max_size=20)),
    fields=st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=5),
    body=st.binary(max_size=64),
    serialize_type=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
)
def test_it_round_trips_any_command(
    code: int, opaque: int, flag: int, remark: str | None, fields: dict, body: bytes, serialize_type: int
) -> None:
    cmd = RemotingCommand(code, "JAVA", 401, opaque, flag, remark, fields, body, serialize_type)
    assert FrameDecoder().feed(encode(cmd) * 2) == [cmd, cmd]


def test_it_keeps_the_codec_modules_free_of_asyncio(repo_root) -> None:  # type: ignore[no-untyped-def]
    import ast

    for name in ("codes.py", "command.py", "acl.py", "errors.py"):
        tree = ast.parse((repo_root / "broker_core" / "remoting" / name).read_text(encoding="utf-8"))
        imported = {
            alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
        }
        imported |= {
            node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
        }
        assert not {
            module for module in imported if module.split(".")[0] in {"asyncio", "uvloop", "socket"}
        }, name
