"""Route the DLQ endpoints."""

from __future__ import annotations

from django.urls import path

from console.dlq import api

app_name = "dlq"

urlpatterns = [
    path("api/dlq/resend/", api.Resend.as_view(), name="api-resend"),
]
