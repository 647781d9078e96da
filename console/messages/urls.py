"""Route the message pages and endpoints."""

from __future__ import annotations

from django.urls import path

from console.messages import api, views

app_name = "messages"

base = "api/clusters/<slug:cluster>/"
urlpatterns = [
    path("clusters/<slug:cluster>/topics/<str:topic>/messages/", views.browse, name="browse"),
    path("clusters/<slug:cluster>/messages/search/", views.search_page, name="search"),
    path("clusters/<slug:cluster>/messages/<str:msg_id>/", views.detail, name="detail"),
    path("clusters/<slug:cluster>/messages/<str:msg_id>/resend/", views.resend, name="resend"),
    path("clusters/<slug:cluster>/topics/<str:topic>/by-key/", views.by_key, name="by-key"),
    path(base + "topics/<str:topic>/browse/", api.TopicMessages.as_view(), name="api-browse"),
    path(base + "messages/by-key/", api.MessagesByKey.as_view(), name="api-by-key"),
    path(base + "messages/search/", api.MessageSearch.as_view(), name="api-search"),
    path(base + "messages/<str:msg_id>/", api.MessageDetail.as_view(), name="api-detail"),
    path(base + "messages/<str:msg_id>/resend/", api.MessageResend.as_view(), name="api-resend"),
    path(base + "messages/<str:msg_id>/trace/", api.MessageTrace.as_view(), name="api-trace"),
]
