"""Route the alerts page and its REST endpoints."""

from __future__ import annotations

from django.urls import path

from console.alerts import api, views

app_name = "alerts"

urlpatterns = [
    path("clusters/<slug:cluster>/alerts/", views.alert_list, name="list"),
    path("api/alerts/", api.AllAlerts.as_view(), name="api-all"),
    path("api/clusters/<slug:cluster>/alerts/", api.AlertList.as_view(), name="api-list"),
    path("api/clusters/<slug:cluster>/alerts/<int:alert_id>/", api.AlertDetail.as_view(), name="api-detail"),
]
