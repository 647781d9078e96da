"""What the audit endpoint answers (declared for the OpenAPI document; ``AuditEntry.to_json``
builds each row)."""

from __future__ import annotations

from rest_framework import serializers


class AuditEntryOut(serializers.Serializer):
    """One audited action: when (ISO 8601), who, what (e.g. ``topic.create``), on which
    cluster (blank: none) and object, the state before and after (JSON values, mostly
    objects; null when not recorded), ``ok`` or ``error`` and why, and the client's address."""

    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    user = serializers.CharField()
    action = serializers.CharField()
    cluster = serializers.CharField(allow_blank=True)
    target = serializers.CharField(allow_blank=True)
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    result = serializers.CharField(help_text="ok or error")
    detail = serializers.CharField(allow_blank=True)
    remoteAddr = serializers.CharField(allow_blank=True)  # noqa: N815


class AuditPageOut(serializers.Serializer):
    """A page of audit rows, newest first, with the total count."""

    count = serializers.IntegerField()
    page = serializers.IntegerField()
    pageSize = serializers.IntegerField()  # noqa: N815
    results = AuditEntryOut(many=True)
