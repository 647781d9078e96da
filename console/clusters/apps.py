"""Register the clusters app."""

from __future__ import annotations

from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "console.clusters"
    label = "clusters"
    verbose_name = "Cluster pages"
