"""Django admin for the console's own records: who may do what where, and the long tasks."""

from __future__ import annotations

from django.contrib import admin

from console.core.models import ClusterAccess, LongTask


@admin.register(ClusterAccess)
class ClusterAccessAdmin(admin.ModelAdmin):
    list_display = ("user", "cluster", "role", "can_export")
    list_filter = ("role", "cluster", "can_export")
    search_fields = ("user__username", "cluster")


@admin.register(LongTask)
class LongTaskAdmin(admin.ModelAdmin):
    list_display = ("created", "kind", "title", "requested_by", "final_state")
    list_filter = ("kind", "final_state")
    readonly_fields = [f.name for f in LongTask._meta.fields]
