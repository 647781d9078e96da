"""Records the console keeps of its own: the long operations users started (bulk resends,
report runs), so each can be listed and followed after the page that started it is gone."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class LongTask(models.Model):
    """One long operation run by a Celery worker; its id is the Celery task id.

    Progress and result live in Celery's result backend (Redis) while the task runs, so a
    worker never writes the console's database; the outcome is copied here once it is
    read finished, and outlives the backend's expiry.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=40)
    title = models.CharField(max_length=200)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    params = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)
    # Filled once the task is seen finished (SUCCESS or FAILURE).
    final_state = models.CharField(max_length=20, blank=True)
    final_info = models.JSONField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.title})"


class ClusterAccess(models.Model):
    """A user's role on one cluster (or on every cluster: ``cluster = "*"``).

    Roles, each including the ones before it: ``viewer`` reads; ``operator`` also acts on
    data (send test messages, reset offsets, resend dead letters, create and update topics
    and groups); ``admin`` also deletes topics and groups and changes broker settings.
    Exporting messages is its own grant (``can_export``), for any role.  Superusers are
    admins everywhere and may export; a user with no row sees nothing.
    """

    VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
    ROLES = [(VIEWER, "viewer"), (OPERATOR, "operator"), (ADMIN, "admin")]
    ALL_CLUSTERS = "*"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="cluster_access"
    )
    cluster = models.CharField(max_length=64, default=ALL_CLUSTERS)
    role = models.CharField(max_length=10, choices=ROLES)
    can_export = models.BooleanField(default=False)

    class Meta:
        unique_together = [("user", "cluster")]
        verbose_name_plural = "cluster access"

    def __str__(self) -> str:
        return f"{self.user} is {self.role} on {self.cluster}"
