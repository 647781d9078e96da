"""Route the console's URLs: the core pages, the health check, the maintenance jobs and the admin site."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    path("", include("console.core.urls")),
    path("", include("console.maintenance.urls")),
    path("", include("console.dlq.urls")),
    path("", include("nameserver.urls")),
    path("", include("console.topics.urls")),
    path("", include("console.groups.urls")),
    path("", include("console.alerts.urls")),
    path("", include("console.messages.urls")),
    path("", include("console.audit.urls")),
    path("", include("console.reports.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("admin/", admin.site.urls),
]
