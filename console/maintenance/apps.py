"""Register the maintenance app."""

from __future__ import annotations

from django.apps import AppConfig


class MaintenanceConfig(AppConfig):
    """Beat-driven broker jobs (delay scan, offset persistence, file expiry) and their runs."""

    name = "console.maintenance"
    label = "maintenance"
    verbose_name = "Maintenance jobs"
