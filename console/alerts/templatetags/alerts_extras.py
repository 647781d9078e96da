"""Template tags of the alerts: the open-alert count on the cluster navigation."""

from __future__ import annotations

from django import template

from console.alerts.models import Alert

register = template.Library()


@register.simple_tag
def open_alert_count(cluster: str) -> int:
    """How many alerts of ``cluster`` are open now."""
    return Alert.objects.filter(cluster=cluster, resolved_at__isnull=True).count()
