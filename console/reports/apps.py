"""Register the reports app."""

from __future__ import annotations

from django.apps import AppConfig


class ReportsConfig(AppConfig):
    """The Spark traffic and lag reports: runs, their outputs, pages and API."""

    name = "console.reports"
    label = "reports"
    verbose_name = "Reports"
