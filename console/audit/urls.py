"""Route the audit page and endpoint."""

from __future__ import annotations

from django.urls import path

from console.audit import api, views

app_name = "audit"

urlpatterns = [
    path("audit/", views.audit_log, name="list"),
    path("api/audit/", api.AuditList.as_view(), name="api-list"),
]
