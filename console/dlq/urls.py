"""Route the DLQ pages (the overview, a group's) and endpoints."""

from __future__ import annotations

from django.urls import path

from console.dlq import api, views

app_name = "dlq"

group = "api/clusters/<slug:cluster>/groups/<str:group>/dlq/"
urlpatterns = [
    path("clusters/<slug:cluster>/dlq/", views.overview, name="overview"),
    path("api/clusters/<slug:cluster>/dlq/", api.DlqOverview.as_view(), name="api-overview"),
    path("clusters/<slug:cluster>/groups/<str:group>/dlq/", views.group_dlq, name="group"),
    path("clusters/<slug:cluster>/groups/<str:group>/dlq/resend/", views.resend, name="resend"),
    path("api/dlq/resend/", api.Resend.as_view(), name="api-resend"),
    path(group, api.GroupDlq.as_view(), name="api-group-dlq"),
    path(group + "export/", api.GroupDlqExport.as_view(), name="api-group-dlq-export"),
    path(group + "resend/", api.GroupDlqResend.as_view(), name="api-group-dlq-resend"),
]
