"""Django admin for the cluster list."""

from __future__ import annotations

from django.contrib import admin

from nameserver.models import Cluster


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "namesrv_addr", "description", "created")
    search_fields = ("name", "namesrv_addr")
