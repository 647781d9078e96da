"""Report runs: what was asked (kind, cluster, period, topics), by whom, and how it went.

The Celery task (console/reports/tasks.py) moves a run from ``queued`` to ``running`` and
then to ``succeeded`` or ``failed``, keeping the Spark stages done and the job's summary;
the Parquet tables themselves stay under ``output`` (spark_reports/outputs.py).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models


class ReportRun(models.Model):
    """One run of a Spark report over one cluster and period."""

    TRAFFIC, LAG = "traffic", "lag"
    KINDS = [(TRAFFIC, "traffic"), (LAG, "lag")]
    QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"
    STATUSES = [(QUEUED, "queued"), (RUNNING, "running"), (SUCCEEDED, "succeeded"), (FAILED, "failed")]
    FINISHED = (SUCCEEDED, FAILED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=10, choices=KINDS)
    cluster = models.CharField(max_length=64)
    # {"since": epoch ms, "until": epoch ms, "topics": [names] (empty: every topic)}
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=STATUSES, default=QUEUED)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )  # None for scheduled runs
    scheduled = models.BooleanField(default=False)
    # "<cluster>:<kind>:<window start>" for scheduled runs: one run per window, whoever asks.
    schedule_key = models.CharField(max_length=160, null=True, blank=True, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    duration_seconds = models.FloatField(null=True, blank=True)
    stages_done = models.IntegerField(default=0)
    stages_total = models.IntegerField(default=0)
    input_rows = models.BigIntegerField(null=True, blank=True)
    input_bytes = models.BigIntegerField(null=True, blank=True)
    output = models.CharField(max_length=1000, blank=True)
    summary = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["cluster", "kind", "-created"])]

    def __str__(self) -> str:
        return f"{self.kind} report {self.id} on {self.cluster} ({self.status})"

    @property
    def since(self) -> int:
        return int(self.params.get("since", 0))

    @property
    def until(self) -> int:
        return int(self.params.get("until", 0))

    @property
    def topics(self) -> list[str]:
        return list(self.params.get("topics") or [])

    @property
    def percent(self) -> float | None:
        """Stages done out of the total (100 once succeeded); None before Spark says."""
        if self.status == self.SUCCEEDED:
            return 100.0
        return round(100.0 * self.stages_done / self.stages_total, 1) if self.stages_total else None

    def to_json(self) -> dict[str, Any]:
        """The run as the API shows it (camelCase, times ISO 8601 UTC, period in epoch ms)."""
        return {
            "id": str(self.id),
            "kind": self.kind,
            "cluster": self.cluster,
            "since": self.since,
            "until": self.until,
            "topics": self.topics,
            "status": self.status,
            "requestedBy": self.requested_by.get_username() if self.requested_by else None,
            "scheduled": self.scheduled,
            "created": self.created.isoformat() if self.created else None,
            "started": self.started.isoformat() if self.started else None,
            "finished": self.finished.isoformat() if self.finished else None,
            "durationSeconds": self.duration_seconds,
            "stagesDone": self.stages_done,
            "stagesTotal": self.stages_total,
            "percent": self.percent,
            "inputRows": self.input_rows,
            "inputBytes": self.input_bytes,
            "output": self.output,
            "summary": self.summary,
            "error": self.error,
        }
