"""Route the DLQ endpoints."""

from __future__ import annotations

from django.urls import path

from console.dlq import api

app_name = "dlq"

urlpatterns = [
    path("api/dlq/resend/", api.Resend.as_view(), name="api-resend"),
    path("api/clusters/<slug:cluster>/groups/<str:group>/dlq/", api.GroupDlq.as_view(), name="api-group-dlq"),
    path(
        "api/clusters/<slug:cluster>/groups/<str:group>/dlq/export/",
        api.GroupDlqExport.as_view(),
        name="api-group-dlq-export",
    ),
    path(
        "api/clusters/<slug:cluster>/groups/<str:group>/dlq/resend/",
        api.GroupDlqResend.as_view(),
        name="api-group-dlq-resend",
    ),
]
