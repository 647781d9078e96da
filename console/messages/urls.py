"""Route the message endpoints."""

from __future__ import annotations

from django.urls import path

from console.messages import api

app_name = "messages"

base = "api/clusters/<slug:cluster>/"
urlpatterns = [
    path(base + "topics/<str:topic>/browse/", api.TopicMessages.as_view(), name="api-browse"),
    path(base + "messages/by-key/", api.MessagesByKey.as_view(), name="api-by-key"),
    path(base + "messages/<str:msg_id>/", api.MessageDetail.as_view(), name="api-detail"),
    path(base + "messages/<str:msg_id>/resend/", api.MessageResend.as_view(), name="api-resend"),
]
