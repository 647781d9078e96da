"""One row per mutating action taken through the console or its API."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    """Who did what to which object of which cluster, the state before and after, and the result.

    ``result`` is ``ok`` or ``error``; ``detail`` holds the error (the broker's code and
    remark when a broker refused).  Rows are never updated or deleted by the console.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    username = models.CharField(max_length=150, db_index=True)  # kept if the user is deleted
    action = models.CharField(max_length=60, db_index=True)
    cluster = models.CharField(max_length=64, blank=True, db_index=True)
    target = models.CharField(max_length=300, blank=True, db_index=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    result = models.CharField(max_length=10)
    detail = models.TextField(blank=True)
    remote_addr = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def to_json(self) -> dict[str, object]:
        """The row for the API: ``before`` and ``after`` as JSON values (old rows that hold the
        Python text of a dict are read back into the object)."""
        from console.audit.diffs import decoded

        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "user": self.username,
            "action": self.action,
            "cluster": self.cluster,
            "target": self.target,
            "before": decoded(self.before),
            "after": decoded(self.after),
            "result": self.result,
            "detail": self.detail,
            "remoteAddr": self.remote_addr,
        }
