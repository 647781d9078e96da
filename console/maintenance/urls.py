"""Route the maintenance page and its REST endpoints."""

from __future__ import annotations

from django.urls import path

from console.maintenance import api, views

app_name = "maintenance"

urlpatterns = [
    path("maintenance/", views.jobs, name="jobs"),
    path("api/maintenance/jobs/", api.JobList.as_view(), name="api-jobs"),
    path("api/maintenance/jobs/<str:job>/run/", api.JobRun.as_view(), name="api-job-run"),
]
