"""Validate the cluster list and broker-config changes sent to the API."""

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
