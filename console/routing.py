"""Route the console's websocket URLs to Channels consumers (the live-update pushes)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from console.alerts.consumers import AlertFeed
from console.clusters.consumers import ClusterLive
from console.messages.consumers import TopicTail
from console.reports.consumers import ReportProgress

websocket_urlpatterns: list[URLPattern | URLResolver] = [
    path("ws/alerts/", AlertFeed.as_asgi()),
    path("ws/clusters/<slug:cluster>/live/", ClusterLive.as_asgi()),
    path("ws/clusters/<slug:cluster>/topics/<str:topic>/tail/", TopicTail.as_asgi()),
    path("ws/clusters/<slug:cluster>/reports/<uuid:run_id>/", ReportProgress.as_asgi()),
]
