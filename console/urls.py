"""Route the console's URLs: the core pages, the health check, the maintenance jobs and the admin site."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("console.core.urls")),
    path("", include("console.maintenance.urls")),
    path("", include("console.dlq.urls")),
    path("admin/", admin.site.urls),
]
