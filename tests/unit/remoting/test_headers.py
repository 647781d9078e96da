"""The declared request and response headers read and write RocketMQ's fields.

The captured PULL_MESSAGE frames of the official C++ client are the test vectors: each
decodes through ``PullMessageRequestHeader`` and encodes back to the fields it sent.
"""

from __future__ import annotations

import pytest

from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand, decode, encode
from broker_core.remoting.headers import (
    GetConsumerListByGroupRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullSysFlag,
)
from tests.unit.remoting.conftest import captured_requests, frame_of

# Fields the ACL layer adds to every signed request: not part of any header.
ACL_FIELDS = {"AccessKey", "Signature", "OnsChannel", "SecurityToken"}


def captured_pulls(capture: str) -> list[RemotingCommand]:
    return [
        cmd
        for cmd in (decode(frame_of(line)[0]) for line in captured_requests(capture))
        if cmd.code == RequestCode.PULL_MESSAGE
    ]


@pytest.mark.parametrize("capture", ["producer-consumer-all.jsonl", "orderly-and-pull.jsonl"])
def test_every_captured_pull_decodes_and_encodes_back_to_its_fields(capture: str) -> None:
    pulls = captured_pulls(capture)
    assert pulls, f"{capture} has no PULL_MESSAGE frame"
    for cmd in pulls:
        header = PullMessageRequestHeader.from_fields(cmd.ext_fields)
        sent = {key: value for key, value in cmd.ext_fields.items() if key not in ACL_FIELDS}
        assert header.to_fields() == sent
        # ... and a request built from it is the same frame, less the signature.
        rebuilt = decode(encode(RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields()))[4:])
        assert rebuilt.ext_fields == sent


def test_a_captured_push_consumer_pull_reads_as_rocketmq_wrote_it() -> None:
    # The push consumer's first pull of its retry queue: long polling, with its subscription.
    cmd = captured_pulls("producer-consumer-all.jsonl")[0]
    header = PullMessageRequestHeader.from_fields(cmd.ext_fields)
    assert header == PullMessageRequestHeader(
        consumer_group="ProbeConsumerGroup",
        topic="%RETRY%ProbeConsumerGroup",
        queue_id=0,
        queue_offset=0,
        max_msg_nums=32,
        sys_flag=PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION,
        commit_offset=0,
        suspend_timeout_millis=15_000,
        subscription="*",
        sub_version=1795339937575,
    )


def test_the_pull_consumer_capture_carries_only_the_subscription_bit() -> None:
    flags = {
        PullMessageRequestHeader.from_fields(cmd.ext_fields).sys_flag
        for cmd in captured_pulls("orderly-and-pull.jsonl")
        if cmd.ext_fields["consumerGroup"] == "ProbePullGroup"
    }
    assert flags == {PullSysFlag.SUBSCRIPTION}


def test_sys_flag_bits_are_rocketmqs() -> None:
    assert [int(flag) for flag in PullSysFlag] == [0x1, 0x2, 0x4, 0x8]
    assert PullSysFlag(6) == PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION
    assert PullSysFlag(0x16) & PullSysFlag.SUBSCRIPTION  # unknown bits are kept, not refused


def test_an_empty_pull_request_takes_the_brokers_defaults() -> None:
    header = PullMessageRequestHeader.from_fields({})
    assert (header.consumer_group, header.topic, header.queue_id, header.queue_offset) == ("", "", 0, 0)
    assert (header.max_msg_nums, header.suspend_timeout_millis, header.subscription) == (32, 15_000, "*")
    assert header.sys_flag == PullSysFlag(0) and header.expression_type is None


def test_a_pull_request_with_a_bad_number_is_refused() -> None:
    with pytest.raises(ValueError):
        PullMessageRequestHeader.from_fields({"queueOffset": "twelve"})


def test_the_expression_type_is_written_only_when_set() -> None:
    header = PullMessageRequestHeader("G", "T", 1, 5, expression_type="TAG")
    assert header.to_fields()["expressionType"] == "TAG"
    assert "expressionType" not in PullMessageRequestHeader("G", "T", 1, 5).to_fields()
    assert PullMessageRequestHeader.from_fields(header.to_fields()) == header


def test_the_pull_response_header_round_trips_and_tolerates_a_missing_next_offset() -> None:
    header = PullMessageResponseHeader(next_begin_offset=7, min_offset=2, max_offset=9)
    fields = header.to_fields()
    assert fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "7", "minOffset": "2", "maxOffset": "9"}
    assert PullMessageResponseHeader.from_fields(fields) == header
    missing = PullMessageResponseHeader.from_fields({})
    assert missing.next_begin_offset is None and missing.next_offset_or(3) == 3
    assert PullMessageResponseHeader.from_fields({"nextBeginOffset": "0"}).next_offset_or(3) == 0


def test_the_consumer_list_request_names_its_group() -> None:
    header = GetConsumerListByGroupRequestHeader("G")
    assert header.to_fields() == {"consumerGroup": "G"}
    assert GetConsumerListByGroupRequestHeader.from_fields(header.to_fields()) == header
