"""The report runs in Django's admin site (read mostly; deleting a row leaves its files)."""

from __future__ import annotations

from django.contrib import admin

from console.reports.models import ReportRun


@admin.register(ReportRun)
class ReportRunAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "cluster", "status", "scheduled", "created", "duration_seconds")
    list_filter = ("kind", "status", "scheduled", "cluster")
