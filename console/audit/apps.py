"""Register the audit app."""

from __future__ import annotations

from django.apps import AppConfig


class AuditConfig(AppConfig):
    """Audit rows written by the services of every feature app."""

    name = "console.audit"
    label = "audit"
    verbose_name = "Audit log"
