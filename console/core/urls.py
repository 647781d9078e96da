"""Route the core app's URLs."""

from __future__ import annotations

from django.contrib.auth.views import LogoutView
from django.urls import path

from console.core import api, auth, tokens, views

app_name = "core"

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("health/", views.health, name="health"),
    path("login/", auth.ThrottledLoginView.as_view(), name="login"),
    path("logout/", LogoutView.as_view(), name="logout"),
    path("api/token/", auth.ThrottledTokenView.as_view(), name="api-token"),
    path("account/token/", tokens.tokens, name="tokens"),
    path("tasks/<uuid:task_id>/", views.task, name="task"),
    path("api/tasks/", api.TaskList.as_view(), name="api-tasks"),
    path("api/tasks/<uuid:task_id>/", api.TaskDetail.as_view(), name="api-task"),
]
