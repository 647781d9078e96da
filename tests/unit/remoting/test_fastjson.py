"""fastjson's dialect: MessageQueue objects and bare integers as map keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_core.messagequeue import MessageQueue
from broker_core.remoting.fastjson import FastjsonError, dumps, loads

MQ = MessageQueue("Orders", "broker-a", 3)


def test_message_queue_keys_are_written_as_objects_and_read_back() -> None:
    body = {"consumeTps": 1.5, "offsetTable": {MQ: {"brokerOffset": 9, "consumerOffset": 4}}}
    raw = dumps(body)
    assert raw == (
        b'{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":3,"topic":"Orders"}:'
        b'{"brokerOffset":9,"consumerOffset":4}}}'
    )
    assert loads(raw) == body


def test_a_java_body_with_spaces_and_bare_int_keys_is_read() -> None:
    raw = b'{"offsetTable" : { {"topic":"T","brokerName":"b","queueId":0} : 12 }, "addrs":{0:"127.0.0.1:1"}}'
    assert loads(raw) == {"offsetTable": {MessageQueue("T", "b", 0): 12}, "addrs": {"0": "127.0.0.1:1"}}


def test_an_object_key_that_is_no_queue_stays_hashable() -> None:
    assert loads(b'{{"a":1}:2}') == {(("a", 1),): 2}


def test_standard_json_goes_through_unchanged() -> None:
    assert loads(b'{"a":[1,2,{"b":null}],"c":"\\u00e9"}') == {"a": [1, 2, {"b": None}], "c": "é"}


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b'{"a":}',
        b'{{"a":1}}',
        b"[1,]",
        b"\xff\xfe",
        b"{" * 100 + b"}" * 100,
        b"{" * 3000,
        b"[1] x",
    ],
)
def test_garbage_is_a_clear_error(raw: bytes) -> None:
    with pytest.raises(FastjsonError):
        loads(raw)


queues = st.builds(MessageQueue, st.text(min_size=1, max_size=8), st.text(max_size=8), st.integers(0, 64))


@given(st.dictionaries(queues, st.integers(-(2**63), 2**63 - 1), max_size=5))
def test_round_trip(table: dict[MessageQueue, int]) -> None:
    assert loads(dumps({"offsetTable": table})) == {"offsetTable": table}
