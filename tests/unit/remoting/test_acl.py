"""ACL 1.0 signatures against the frames the C++ client signed."""

from __future__ import annotations

import pytest

from broker_core.remoting.acl import ACCESS_KEY, ONS_CHANNEL, SIGNATURE, sign, verify
from broker_core.remoting.command import RemotingCommand, decode
from tests.unit.remoting.conftest import captured_requests, frame_of


def test_it_computes_the_signature_of_every_frame_signed_with_sk456() -> None:
    lines = captured_requests("acl-credentials.jsonl")
    assert len(lines) == 44
    for line in lines:
        cmd = decode(frame_of(line)[0])
        assert cmd.ext_fields[ACCESS_KEY]  # credentials were set
        assert sign(cmd.ext_fields, cmd.body, "SK456") == line["sig_check_SK456"]
        assert verify(cmd, "SK456")
        assert not verify(cmd, "SK457")


@pytest.mark.parametrize("capture", ["producer-consumer-all.jsonl", "compressed-bodies.jsonl"])
def test_it_verifies_the_empty_secret_signatures_sent_without_credentials(capture: str) -> None:
    for line in captured_requests(capture):
        cmd = decode(frame_of(line)[0])
        assert cmd.ext_fields[ACCESS_KEY] == "" and cmd.ext_fields[ONS_CHANNEL] == "ALIYUN"
        assert verify(cmd, "")
        assert sign(cmd.ext_fields, cmd.body, "SK456") == line["sig_check_SK456"]


def test_it_signs_sorted_values_then_the_body_ignoring_the_signature_field() -> None:
    fields = {"b": "2", "a": "1", SIGNATURE: "ignored"}
    assert sign(fields, b"body", "key") == sign({"a": "1", "b": "2"}, b"body", "key")
    assert sign(fields, b"body", "key") != sign(fields, b"bodz", "key")
    assert sign({"a": "12"}, b"", "k") == sign({"a": "1", "b": "2"}, b"", "k")  # values only, no separators


def test_it_refuses_a_command_without_signature_or_with_a_tampered_body() -> None:
    cmd = RemotingCommand.request(10, {ACCESS_KEY: "AK", "topic": "T"}, b"hello")
    assert not verify(cmd, "SK")
    cmd.ext_fields[SIGNATURE] = sign(cmd.ext_fields, cmd.body, "SK")
    assert verify(cmd, "SK")
    cmd.body = b"hellO"
    assert not verify(cmd, "SK")
