"""Validate the cluster list, broker-config changes and ACL accounts sent to the API."""

from __future__ import annotations

from rest_framework import serializers

from nameserver.models import Cluster


class ClusterSerializer(serializers.ModelSerializer):
    class Meta:
        model = Cluster
        fields = ["name", "namesrv_addr", "description", "created"]
        read_only_fields = ["created"]


class BrokerConfigChange(serializers.Serializer):
    """``{"changes": {"key": "value", ...}}``: RocketMQ key names, values as text."""

    changes = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=1000), allow_empty=False
    )


PERM = serializers.ChoiceField(choices=["DENY", "PUB", "SUB", "PUB|SUB"], required=False)


class AclAccount(serializers.Serializer):
    """A plain_acl.yml account, as RocketMQ names its fields."""

    accessKey = serializers.RegexField(r"^[A-Za-z0-9_.@-]{3,64}$")  # noqa: N815
    secretKey = serializers.CharField(min_length=6, max_length=128, required=False)  # noqa: N815
    whiteRemoteAddress = serializers.CharField(max_length=512, required=False, allow_blank=True)  # noqa: N815
    admin = serializers.BooleanField(required=False)
    defaultTopicPerm = PERM  # noqa: N815
    defaultGroupPerm = PERM  # noqa: N815
    topicPerms = serializers.ListField(
        child=serializers.RegexField(r"^[%|A-Za-z0-9_-]+=(DENY|PUB|SUB|PUB\|SUB)$"), required=False
    )  # noqa: N815
    groupPerms = serializers.ListField(
        child=serializers.RegexField(r"^[%|A-Za-z0-9_-]+=(DENY|PUB|SUB|PUB\|SUB)$"), required=False
    )  # noqa: N815


class WhiteList(serializers.Serializer):
    addresses = serializers.ListField(
        child=serializers.RegexField(r"^[0-9A-Fa-f.:*{},-]+$"), allow_empty=True
    )
