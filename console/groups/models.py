"""Per-group thresholds the console keeps (RocketMQ Dashboard's consumer monitor)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.db import models


class GroupMonitor(models.Model):
    """Thresholds for one consumer group of one cluster, each one an alert kind
    (console/alerts): fewer clients online than ``min_clients`` (0: off), more messages
    behind than ``max_lag``, further behind than ``max_seconds_behind`` seconds, or a lag
    that kept growing over the last ``growing_minutes`` (null: off).  ``webhook_url``
    overrides the platform's alert webhook for this group."""

    cluster = models.CharField(max_length=64)
    group = models.CharField(max_length=255)
    min_clients = models.PositiveIntegerField(default=0)
    max_lag = models.PositiveBigIntegerField(null=True, blank=True)
    max_seconds_behind = models.PositiveIntegerField(null=True, blank=True)
    growing_minutes = models.PositiveIntegerField(null=True, blank=True)
    webhook_url = models.URLField(max_length=500, blank=True, default="")
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        unique_together = [("cluster", "group")]
        ordering = ["cluster", "group"]

    @property
    def webhook_shown(self) -> str:
        """The webhook as anyone who may view the group sees it: scheme and host only (its
        path and query often carry a token); the whole URL is for the form operators use."""
        if not self.webhook_url:
            return ""
        parts = urlsplit(self.webhook_url)
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{parts.hostname or ''}{port}/…"

    def to_json(self) -> dict[str, object]:
        return {
            "cluster": self.cluster,
            "group": self.group,
            "minClients": self.min_clients,
            "maxLag": self.max_lag,
            "maxSecondsBehind": self.max_seconds_behind,
            "growingMinutes": self.growing_minutes,
            "webhookUrl": self.webhook_shown,
            "updated": self.updated.isoformat(),
        }
