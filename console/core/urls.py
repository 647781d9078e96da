"""Route the core app's URLs."""

from __future__ import annotations

from django.urls import path

from console.core import views

app_name = "core"

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
]
