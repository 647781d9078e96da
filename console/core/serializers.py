"""What the long-task endpoints answer (declared for the OpenAPI document;
``longtasks.status`` builds each task)."""

from __future__ import annotations

from rest_framework import serializers


class TaskOut(serializers.Serializer):
    """One long task: its id, kind (e.g. ``dlq_resend``), title, who started it (null: no
    one signed in), its parameters, when it was created and finished (ISO 8601; null while
    running), its Celery state, progress (``done`` of ``total``, ``percent``; null before
    the task reports any) and note, and once finished its result (which depends on the
    kind) or error."""

    id = serializers.UUIDField()
    kind = serializers.CharField()
    title = serializers.CharField()
    requestedBy = serializers.CharField(allow_null=True)  # noqa: N815
    params = serializers.DictField()
    created = serializers.DateTimeField()
    finished = serializers.DateTimeField(allow_null=True)
    state = serializers.CharField(help_text="PENDING, PROGRESS, SUCCESS, FAILURE, REVOKED (Celery's states)")
    done = serializers.IntegerField(allow_null=True)
    total = serializers.IntegerField(allow_null=True)
    percent = serializers.FloatField(allow_null=True)
    note = serializers.CharField(allow_blank=True)
    result = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_null=True)


class TaskListOut(serializers.Serializer):
    """The latest long tasks, newest first."""

    tasks = TaskOut(many=True)


class TaskErrorOut(serializers.Serializer):
    """Why there is no answer: ``bad_request`` (400), ``not_found`` (404: no such task of
    yours) or ``redis_unavailable`` (503: the result backend did not answer)."""

    error = serializers.CharField()
    detail = serializers.CharField()
