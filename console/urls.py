"""Route the console's URLs: the core pages, the health check, the maintenance jobs and the admin site."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import IsAuthenticated

urlpatterns = [
    path("", include("console.core.urls")),
    path("", include("console.maintenance.urls")),
    path("", include("console.dlq.urls")),
    path("", include("console.clusters.urls")),
    path("", include("console.topics.urls")),
    path("", include("console.groups.urls")),
    path("", include("console.alerts.urls")),
    path("", include("console.messages.urls")),
    path("", include("console.audit.urls")),
    path("", include("console.reports.urls")),
    # Like every other endpoint, the API's description needs a signed-in user (the README
    # says so): the schema over the API's own authentication, the docs page via the login page.
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]), name="api-schema"),
    path(
        "api/docs/",
        login_required(SpectacularSwaggerView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
    path("admin/", admin.site.urls),
]
