"""Store a group's thresholds (the alert check in console/alerts reads them), audited.

The REST endpoint and the group page's form both come through ``save_monitor`` so they
validate alike (``MonitorWrite``) and leave the same audit row.
"""

from __future__ import annotations

from typing import Any

from console.audit.services import audited
from console.groups.models import GroupMonitor


def save_monitor(request: Any, cluster: str, group: str, data: dict[str, Any]) -> GroupMonitor:
    """Create or replace ``group``'s thresholds from validated ``MonitorWrite`` data."""
    with audited(request, "group.monitor.save", cluster, group) as audit:
        before = GroupMonitor.objects.filter(cluster=cluster, group=group).first()
        audit.before = before.to_json() if before else None
        row, _ = GroupMonitor.objects.update_or_create(
            cluster=cluster,
            group=group,
            defaults={
                "min_clients": data.get("minClients", 0),
                "max_lag": data.get("maxLag"),
                "max_seconds_behind": data.get("maxSecondsBehind"),
                "growing_minutes": data.get("growingMinutes"),
                "webhook_url": data.get("webhookUrl") or "",
            },
        )
        audit.after = row.to_json()
    return row
