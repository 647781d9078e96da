"""Route the consumer-group endpoints."""

from __future__ import annotations

from django.urls import path

from console.groups import api, views

app_name = "groups"

base = "api/clusters/<slug:cluster>/groups/"
urlpatterns = [
    path("clusters/<slug:cluster>/groups/", views.group_list, name="list"),
    path("clusters/<slug:cluster>/groups-new/", views.create_group, name="create"),
    path("clusters/<slug:cluster>/groups/<str:group>/", views.group_detail, name="detail"),
    path(
        "clusters/<slug:cluster>/groups/<str:group>/reset/preview/", views.reset_preview, name="reset-preview"
    ),
    path("clusters/<slug:cluster>/groups/<str:group>/reset/apply/", views.reset_apply, name="reset-apply"),
    path("clusters/<slug:cluster>/groups/<str:group>/config/", views.save_config, name="config"),
    path("clusters/<slug:cluster>/groups/<str:group>/thresholds/", views.save_thresholds, name="thresholds"),
    path("clusters/<slug:cluster>/groups/<str:group>/delete/", views.delete_group, name="delete"),
    path("clusters/<slug:cluster>/groups/<str:group>/pop/", views.pop_section, name="pop"),
    path(
        "clusters/<slug:cluster>/groups/<str:group>/clients/<str:client_id>/",
        views.client_info,
        name="client",
    ),
    path(base, api.GroupList.as_view(), name="api-list"),
    path("api/clusters/<slug:cluster>/monitors/", api.MonitorList.as_view(), name="api-monitors"),
    path(base + "<str:group>/monitor/", api.Monitor.as_view(), name="api-monitor"),
    path(
        "api/clusters/<slug:cluster>/producers/<str:group>/",
        api.ProducerConnections.as_view(),
        name="api-producers",
    ),
    path(base + "<str:group>/", api.GroupDetail.as_view(), name="api-detail"),
    path(base + "<str:group>/pop/", api.GroupPop.as_view(), name="api-pop"),
    path(base + "<str:group>/clients/<str:client_id>/", api.GroupClient.as_view(), name="api-client"),
    path(base + "<str:group>/offsets/preview/", api.OffsetPreview.as_view(), name="api-offsets-preview"),
    path(base + "<str:group>/offsets/reset/", api.OffsetReset_.as_view(), name="api-offsets-reset"),
]
