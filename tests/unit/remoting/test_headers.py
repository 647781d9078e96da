"""The declared request and response headers read and write RocketMQ's fields.

The captured PULL_MESSAGE and SEND_MESSAGE frames of the official C++ client are the test
vectors: each decodes through its header (``PullMessageRequestHeader``,
``SendMessageRequestHeader``) and encodes back to the fields it sent; the broker's
captured answers to the sends do the same through ``SendMessageResponseHeader``.
"""

from __future__ import annotations

import json

import pytest

from broker_core.client.requests import send_message_request
from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand, decode, encode
from broker_core.remoting.headers import (
    SEND_V1_KEYS,
    SEND_V2_KEYS,
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyRequestHeader,
    EndTransactionRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PullSysFlag,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
)
from tests.unit.remoting.conftest import CAPTURES, captured_requests, frame_of

CAPTURE_FILES = [
    "producer-consumer-all.jsonl",
    "orderly-and-pull.jsonl",
    "compressed-bodies.jsonl",
    "acl-credentials.jsonl",
]

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


# -- SEND_MESSAGE ---------------------------------------------------------------------------


def captured_sends(capture: str) -> list[RemotingCommand]:
    return [
        cmd
        for cmd in (decode(frame_of(line)[0]) for line in captured_requests(capture))
        if cmd.code == RequestCode.SEND_MESSAGE
    ]


def unsigned(fields: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in fields.items() if key not in ACL_FIELDS}


@pytest.mark.parametrize("capture", CAPTURE_FILES)
def test_every_captured_send_decodes_and_encodes_back_to_its_fields(capture: str) -> None:
    sends = captured_sends(capture)
    assert sends, f"{capture} has no SEND_MESSAGE frame"
    for cmd in sends:
        header = SendMessageRequestHeader.from_fields(cmd.ext_fields)
        sent = unsigned(cmd.ext_fields)
        # The C++ client writes its booleans (batch, unitMode) as 1/0.
        assert header.to_fields("CPP") == sent
        rebuilt = decode(
            encode(RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_fields("CPP")))[4:]
        )
        assert rebuilt.ext_fields == sent


@pytest.mark.parametrize("capture", CAPTURE_FILES)
def test_every_captured_send_reads_the_same_in_the_v2_spelling(capture: str) -> None:
    for cmd in captured_sends(capture):
        header = SendMessageRequestHeader.from_fields(cmd.ext_fields)
        v2 = header.to_v2_fields()
        assert set(v2) <= set(SEND_V2_KEYS) and "b" in v2
        frame = encode(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, v2, cmd.body))
        assert SendMessageRequestHeader.from_fields(decode(frame[4:]).ext_fields) == header


def test_a_captured_send_reads_as_the_cpp_client_wrote_it() -> None:
    cmd = captured_sends("producer-consumer-all.jsonl")[0]
    header = SendMessageRequestHeader.from_fields(cmd.ext_fields)
    assert header == SendMessageRequestHeader(
        producer_group="ProbeProducerGroup",
        topic="ProbeTopic",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp=header.born_timestamp,
        flag=0,
        properties=header.properties,
        reconsume_times=0,
        unit_mode=False,
        max_reconsume_times=None,
        batch=False,
        broker_name=None,
    )
    assert header.born_timestamp > 1_700_000_000_000 and "TAGS\x01TagA\x02" in header.properties


def test_the_captured_batch_sent_as_send_message_reads_as_a_batch() -> None:
    # The C++ 1.2.x client sends a batch as SEND_MESSAGE with batch = 1.
    batches = [
        SendMessageRequestHeader.from_fields(cmd.ext_fields)
        for cmd in captured_sends("producer-consumer-all.jsonl")
        if cmd.ext_fields.get("batch") == "1"
    ]
    assert batches and all(header.batch for header in batches)


def test_the_v2_keys_name_rocketmqs_v1_fields() -> None:
    # RocketMQ SendMessageRequestHeaderV2 (n, brokerName, is RocketMQ 5's).
    assert dict(zip(SEND_V2_KEYS, SEND_V1_KEYS, strict=True)) == {
        "a": "producerGroup",
        "b": "topic",
        "c": "defaultTopic",
        "d": "defaultTopicQueueNums",
        "e": "queueId",
        "f": "sysFlag",
        "g": "bornTimestamp",
        "h": "flag",
        "i": "properties",
        "j": "reconsumeTimes",
        "k": "unitMode",
        "l": "maxReconsumeTimes",
        "m": "batch",
        "n": "brokerName",
    }


def test_a_send_header_writes_java_booleans_and_its_optional_fields_only_when_set() -> None:
    header = SendMessageRequestHeader("G", "T", batch=True)
    fields = header.to_v2_fields()
    assert (fields["k"], fields["m"]) == ("false", "true")
    assert "l" not in fields and "n" not in fields
    full = SendMessageRequestHeader(
        "G", "%RETRY%G", reconsume_times=2, max_reconsume_times=5, broker_name="b"
    )
    assert SendMessageRequestHeader.from_fields(full.to_fields()) == full
    assert SendMessageRequestHeader.from_fields(full.to_v2_fields()) == full


def test_a_v1_header_under_a_v2_code_reads_as_v1() -> None:
    # The spelling follows the fields (V2 has "b"), not the request code.
    header = SendMessageRequestHeader.from_fields({"topic": "T", "queueId": "3"})
    assert (header.topic, header.queue_id, header.default_topic, header.default_topic_queue_nums) == (
        "T",
        3,
        "TBW102",
        4,
    )


@pytest.mark.parametrize(
    ("key", "name"), [("e", "queueId"), ("l", "maxReconsumeTimes"), ("d", "defaultTopicQueueNums")]
)
def test_a_v2_number_that_is_no_number_is_named_by_its_v1_name(key: str, name: str) -> None:
    with pytest.raises(ValueError, match=f"^header field {name} is not a number: 'x'$"):
        SendMessageRequestHeader.from_fields({"b": "T", key: "x"})


def test_a_send_without_a_topic_is_refused() -> None:
    for fields in ({}, {"topic": ""}, {"a": "G"}):
        with pytest.raises(ValueError, match="names no topic"):
            SendMessageRequestHeader.from_fields(fields)


def captured_send_answers(capture: str) -> list[dict[str, str]]:
    path = CAPTURES / capture
    if not path.exists():
        pytest.skip(f"capture {path} is not available")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [
        json.loads(line["header"])["extFields"]
        for line in lines
        if line.get("dir") == "out" and line.get("what") == "response to 10"
    ]


@pytest.mark.parametrize("capture", CAPTURE_FILES)
def test_every_captured_send_answer_decodes_and_encodes_back(capture: str) -> None:
    answers = captured_send_answers(capture)
    assert answers, f"{capture} has no answer to a send"
    for fields in answers:
        header = SendMessageResponseHeader.from_fields(fields)
        assert header.to_fields() == fields
        assert header.region_id == "DefaultRegion" and header.trace_on


def test_a_send_answer_without_its_optional_fields_takes_the_java_clients_defaults() -> None:
    header = SendMessageResponseHeader.from_fields({"msgId": "M"})
    assert (header.msg_id, header.queue_id, header.queue_offset) == ("M", None, -1)
    assert (header.region_id, header.trace_on) == ("DefaultRegion", True)
    assert not SendMessageResponseHeader.from_fields({"TRACE_ON": "false"}).trace_on


# -- group, connection, relay and transaction requests ----------------------------------------

HeaderType = (
    GetConsumeStatsRequestHeader
    | GetConsumerConnectionListRequestHeader
    | GetProducerConnectionListRequestHeader
    | GetConsumerRunningInfoRequestHeader
    | ConsumeMessageDirectlyRequestHeader
    | UnregisterClientRequestHeader
    | NotifyConsumerIdsChangedRequestHeader
    | EndTransactionRequestHeader
    | CheckTransactionStateRequestHeader
)


@pytest.mark.parametrize(
    ("header", "fields"),
    [
        (GetConsumeStatsRequestHeader("G"), {"consumerGroup": "G"}),
        (GetConsumeStatsRequestHeader("G", "T"), {"consumerGroup": "G", "topic": "T"}),
        (GetConsumerConnectionListRequestHeader("G"), {"consumerGroup": "G"}),
        (GetProducerConnectionListRequestHeader("P"), {"producerGroup": "P"}),
        (
            GetConsumerRunningInfoRequestHeader("G", "c1"),
            {"consumerGroup": "G", "clientId": "c1", "jstackEnable": "false"},
        ),
        (
            ConsumeMessageDirectlyRequestHeader("G", "c1", "M", "broker-a"),
            {"consumerGroup": "G", "clientId": "c1", "msgId": "M", "brokerName": "broker-a"},
        ),
        (
            ConsumeMessageDirectlyRequestHeader("G", "c1", "M"),
            {"consumerGroup": "G", "clientId": "c1", "msgId": "M"},
        ),
        (UnregisterClientRequestHeader("c1", producer_group="P"), {"clientID": "c1", "producerGroup": "P"}),
        (UnregisterClientRequestHeader("c1", consumer_group="G"), {"clientID": "c1", "consumerGroup": "G"}),
        (NotifyConsumerIdsChangedRequestHeader("G"), {"consumerGroup": "G"}),
        (
            EndTransactionRequestHeader("P", 3, 1024, 8, True, "U", "T", "U", "broker-a"),
            {
                "producerGroup": "P",
                "tranStateTableOffset": "3",
                "commitLogOffset": "1024",
                "commitOrRollback": "8",
                "fromTransactionCheck": "true",
                "msgId": "U",
                "topic": "T",
                "transactionId": "U",
                "brokerName": "broker-a",
            },
        ),
        (
            CheckTransactionStateRequestHeader(3, 1024, "U", "U", "0A00000100002A9F"),
            {
                "tranStateTableOffset": "3",
                "commitLogOffset": "1024",
                "msgId": "U",
                "transactionId": "U",
                "offsetMsgId": "0A00000100002A9F",
            },
        ),
        (
            CheckTransactionStateRequestHeader(0, 0, "U", "U", "O", "T", "broker-a"),
            {
                "tranStateTableOffset": "0",
                "commitLogOffset": "0",
                "msgId": "U",
                "transactionId": "U",
                "offsetMsgId": "O",
                "topic": "T",
                "brokerName": "broker-a",
            },
        ),
    ],
)
def test_each_request_header_writes_rocketmqs_fields_and_reads_them_back(
    header: HeaderType, fields: dict[str, str]
) -> None:
    assert header.to_fields() == fields
    assert type(header).from_fields(fields) == header


def test_an_end_transaction_reads_the_cpp_clients_booleans_and_defaults() -> None:
    header = EndTransactionRequestHeader.from_fields({"fromTransactionCheck": "1"})
    assert header.from_transaction_check
    assert (header.tran_state_table_offset, header.commit_log_offset, header.commit_or_rollback) == (
        -1,
        -1,
        0,
    )
    with pytest.raises(ValueError):
        EndTransactionRequestHeader.from_fields({"commitLogOffset": "x"})


def test_a_check_back_without_offsets_leaves_them_to_the_record() -> None:
    # The producer takes an absent offset from the half message's record, so it reads as None.
    header = CheckTransactionStateRequestHeader.from_fields({"msgId": "U"})
    assert (header.tran_state_table_offset, header.commit_log_offset) == (None, None)
    assert (header.transaction_id, header.topic, header.broker_name) == ("", None, None)
    assert header.to_fields() == {"msgId": "U", "transactionId": "", "offsetMsgId": ""}
    with pytest.raises(ValueError):
        CheckTransactionStateRequestHeader.from_fields({"tranStateTableOffset": "x"})


def test_a_send_request_is_v2_and_a_batch_goes_as_send_batch_message() -> None:
    header = SendMessageRequestHeader("P", "T", queue_id=1, born_timestamp=5)
    single = send_message_request(header, b"body")
    assert (single.code, single.ext_fields, single.body) == (
        RequestCode.SEND_MESSAGE_V2,
        header.to_v2_fields(),
        b"body",
    )
    header.batch = True
    assert send_message_request(header, b"batch").code == RequestCode.SEND_BATCH_MESSAGE
