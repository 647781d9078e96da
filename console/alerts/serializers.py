"""What the alert endpoints answer (declared for the OpenAPI document; ``Alert.to_json`` and
``queries.page`` build it).  The filters they take are ``queries.AlertFilter``."""

from __future__ import annotations

from rest_framework import serializers

from console.alerts.models import Alert


class AlertWebhookOut(serializers.Serializer):
    """How the latest event's webhook delivery went: none, pending, delivered or failed."""

    status = serializers.ChoiceField(
        choices=[Alert.WEBHOOK_NONE, Alert.WEBHOOK_PENDING, Alert.WEBHOOK_DELIVERED, Alert.WEBHOOK_FAILED]
    )
    attempts = serializers.IntegerField()
    lastError = serializers.CharField(allow_blank=True)  # noqa: N815


class AlertOut(serializers.Serializer):
    """One alert: the (cluster, group, kind) it is of, the threshold, the figure when raised
    and the latest one seen, when it was raised and resolved (null: still open) and why."""

    id = serializers.IntegerField()
    cluster = serializers.CharField()
    group = serializers.CharField()
    kind = serializers.ChoiceField(choices=[k for k, _ in Alert.KINDS])
    threshold = serializers.FloatField()
    value = serializers.FloatField()
    lastValue = serializers.FloatField()  # noqa: N815
    message = serializers.CharField()
    open = serializers.BooleanField()
    raisedAt = serializers.DateTimeField()  # noqa: N815
    resolvedAt = serializers.DateTimeField(allow_null=True)  # noqa: N815
    resolution = serializers.CharField(allow_blank=True)
    webhook = AlertWebhookOut()


class AlertPageOut(serializers.Serializer):
    """A page of alerts, newest first, with the total count."""

    count = serializers.IntegerField()
    page = serializers.IntegerField()
    pageSize = serializers.IntegerField()  # noqa: N815
    results = AlertOut(many=True)


class ClusterAlertPageOut(AlertPageOut):
    """A page of one cluster's alerts, and how many of its alerts are open."""

    openCount = serializers.IntegerField()  # noqa: N815


class AlertNotFoundOut(serializers.Serializer):
    """No such alert on the cluster (404)."""

    error = serializers.CharField()
    detail = serializers.CharField()
