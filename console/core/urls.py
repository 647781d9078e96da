"""Route the core app's URLs."""

from __future__ import annotations

from django.urls import path

from console.core import api, views

app_name = "core"

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("api/tasks/", api.TaskList.as_view(), name="api-tasks"),
    path("api/tasks/<uuid:task_id>/", api.TaskDetail.as_view(), name="api-task"),
]
