"""Per-group thresholds the console keeps (RocketMQ Dashboard's consumer monitor)."""

from __future__ import annotations

from django.db import models


class GroupMonitor(models.Model):
    """Thresholds for one consumer group of one cluster: fewer clients online than
    ``min_clients``, or more messages behind than ``max_lag``, is worth an alert."""

    cluster = models.CharField(max_length=64)
    group = models.CharField(max_length=255)
    min_clients = models.PositiveIntegerField(default=0)
    max_lag = models.PositiveBigIntegerField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        unique_together = [("cluster", "group")]
        ordering = ["cluster", "group"]

    def to_json(self) -> dict[str, object]:
        return {
            "cluster": self.cluster,
            "group": self.group,
            "minClients": self.min_clients,
            "maxLag": self.max_lag,
            "updated": self.updated.isoformat(),
        }
