"""Alerts in Django's admin: read-only (the check job writes them)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from console.alerts.models import Alert


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ("cluster", "group", "kind", "value", "last_value", "raised_at", "resolved_at")
    list_filter = ("cluster", "kind")
    search_fields = ("group", "message")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
