"""Validate what the topic endpoints accept."""

from __future__ import annotations

import base64
import binascii

from rest_framework import serializers

TOPIC_NAME = r"^[%|a-zA-Z0-9_-]{1,127}$"
# The same rule as a browser form's ``pattern`` (Chromium compiles it with the ``v`` flag,
# where ``|`` and ``-`` must be escaped inside a class), and in words.
TOPIC_NAME_HTML_PATTERN = r"[%\|a-zA-Z0-9_\-]{1,127}"
TOPIC_NAME_RULE = "letters, digits, %, |, _ and -, at most 127 characters (no spaces)"


class TopicWrite(serializers.Serializer):
    """Create or update: queue counts, permission, order flag, and where (a broker cluster
    name, or every master when omitted)."""

    name = serializers.RegexField(
        TOPIC_NAME,
        required=False,
        # Django %-formats validation messages: the rule's "%" is doubled to stay one.
        error_messages={"invalid": "a topic name has " + TOPIC_NAME_RULE.replace("%", "%%")},
    )
    readQueueNums = serializers.IntegerField(min_value=1, max_value=1024, default=8)  # noqa: N815
    writeQueueNums = serializers.IntegerField(min_value=1, max_value=1024, default=8)  # noqa: N815
    perm = serializers.ChoiceField(choices=["RW", "R-", "-W", "--"], default="RW")
    order = serializers.BooleanField(default=False)
    brokerCluster = serializers.CharField(required=False, allow_blank=True, max_length=127)  # noqa: N815


class TestMessage(serializers.Serializer):
    """A message to send from the console."""

    body = serializers.CharField(allow_blank=True, max_length=6 * 1024 * 1024, trim_whitespace=False)
    # "text" (sent as UTF-8) or "base64" (any bytes, e.g. a binary payload).
    bodyEncoding = serializers.ChoiceField(choices=["text", "base64"], default="text")  # noqa: N815
    tags = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)
    keys = serializers.CharField(required=False, allow_blank=True, default="", max_length=1024)
    properties = serializers.DictField(
        child=serializers.CharField(max_length=4096), required=False, default=dict
    )
    delayLevel = serializers.IntegerField(min_value=0, max_value=18, default=0)  # noqa: N815

    def validate(self, data: dict) -> dict:
        if data["bodyEncoding"] == "base64":
            try:
                data["bytes"] = base64.b64decode(data["body"], validate=True)
            except (binascii.Error, ValueError):
                raise serializers.ValidationError({"body": "not valid base64"}) from None
        else:
            data["bytes"] = data["body"].encode("utf-8")
        if len(data["bytes"]) > 4 * 1024 * 1024:
            raise serializers.ValidationError({"body": "larger than 4 MiB (maxMessageSize)"})
        return data

    def validate_properties(self, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if not key or any(c in key + text for c in "\x01\x02"):
                raise serializers.ValidationError(f"property {key!r}: empty name or a reserved separator")
        return value
