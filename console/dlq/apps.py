"""Register the DLQ app."""

from __future__ import annotations

from django.apps import AppConfig


class DlqConfig(AppConfig):
    """Dead letters of each consumer group, and the bulk resend task."""

    name = "console.dlq"
    label = "dlq"
    verbose_name = "Dead-letter queues"
