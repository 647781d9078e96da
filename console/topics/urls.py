"""Route the topic pages and endpoints."""

from __future__ import annotations

from django.urls import path

from console.topics import api, views

app_name = "topics"

base = "api/clusters/<slug:cluster>/topics/"
urlpatterns = [
    path("clusters/<slug:cluster>/topics/", views.topic_list, name="list"),
    path("clusters/<slug:cluster>/topics/<str:topic>/", views.topic_detail, name="detail"),
    path("clusters/<slug:cluster>/topics/<str:topic>/send/", views.send_message, name="send"),
    path("clusters/<slug:cluster>/topics-new/", views.create_topic, name="create"),
    path("clusters/<slug:cluster>/topics/<str:topic>/delete/", views.delete_topic, name="delete"),
    path("clusters/<slug:cluster>/topics/<str:topic>/update/", views.update_topic, name="update"),
    path(base, api.TopicList.as_view(), name="api-list"),
    path(base + "<str:topic>/", api.TopicDetail.as_view(), name="api-detail"),
    path(base + "<str:topic>/impact/", api.TopicImpact.as_view(), name="api-impact"),
    path(base + "<str:topic>/messages/", api.TopicMessageSend.as_view(), name="api-send"),
    path(base + "<str:topic>/offset-by-time/", api.TopicOffsetByTime.as_view(), name="api-offset-by-time"),
]
