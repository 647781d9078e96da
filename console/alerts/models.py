"""An alert: one threshold of one group crossed, from when it was raised until it cleared;
or messages of the group deleted by file expiry before it consumed them; or a slave broker
disconnected from its master or too far behind it."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q


def _number(value: float | None) -> float | int | None:
    """Whole numbers as ints in JSON (messages, clients), fractions as they are (seconds)."""
    if value is None:
        return None
    return int(value) if float(value).is_integer() else round(value, 3)


class Alert(models.Model):
    """One open (``resolved_at`` null) or resolved alert of a (cluster, group, kind).

    At most one alert per (cluster, group, kind) is open: a partial unique constraint
    holds it even when two checks run at once (the loser's insert fails and it updates the
    winner's row instead).  ``value`` is the figure when raised, ``last_value`` the latest
    one seen (the one that cleared it, once resolved).  The webhook fields say how the
    latest event's delivery went.
    """

    LAG = "lag"
    SECONDS_BEHIND = "seconds_behind"
    GROWING = "growing"
    CLIENTS = "clients"
    # Not a threshold: file expiry deleted messages the group had not consumed (the value
    # is how many; open until the group's offsets are past the gap, see services.py).
    EXPIRED = "expired"
    # Not a group's: a slave of a broker set whose HA link is down or that is further behind
    # its master than QUIVER_REPLICATION_MAX_BEHIND_*; ``group`` names the slave
    # (``<brokerName>-slave-<brokerId>``), the value is the bytes behind (0 when unknown).
    REPLICATION = "replication"
    KINDS = [
        (LAG, "messages behind"),
        (SECONDS_BEHIND, "seconds behind"),
        (GROWING, "lag growing"),
        (CLIENTS, "clients online"),
        (EXPIRED, "unconsumed messages deleted by expiry"),
        (REPLICATION, "slave disconnected or behind"),
    ]
    WEBHOOK_NONE = "none"
    WEBHOOK_PENDING = "pending"
    WEBHOOK_DELIVERED = "delivered"
    WEBHOOK_FAILED = "failed"

    cluster = models.CharField(max_length=64)
    group = models.CharField(max_length=255)
    kind = models.CharField(max_length=16, choices=KINDS)
    threshold = models.FloatField()
    value = models.FloatField()
    last_value = models.FloatField()
    message = models.TextField()
    raised_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)
    webhook_status = models.CharField(max_length=16, default=WEBHOOK_NONE)
    webhook_attempts = models.PositiveIntegerField(default=0)
    webhook_error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-raised_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "group", "kind"],
                condition=Q(resolved_at__isnull=True),
                name="alerts_one_open_per_group_kind",
            )
        ]
        indexes = [models.Index(fields=["cluster", "resolved_at"], name="alerts_cluster_open")]

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "cluster": self.cluster,
            "group": self.group,
            "kind": self.kind,
            "threshold": _number(self.threshold),
            "value": _number(self.value),
            "lastValue": _number(self.last_value),
            "message": self.message,
            "open": self.is_open,
            "raisedAt": self.raised_at.isoformat(),
            "resolvedAt": self.resolved_at.isoformat() if self.resolved_at else None,
            "resolution": self.resolution,
            "webhook": {
                "status": self.webhook_status,
                "attempts": self.webhook_attempts,
                "lastError": self.webhook_error,
            },
        }
