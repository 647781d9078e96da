"""Celery tasks of the lag alerts: thin shells over services.py and notify.py.

Beat runs ``check_lag_alerts`` every ``QUIVER_ALERT_CHECK_SECONDS``; each raise or resolve
goes to the console at once and to the webhook through ``deliver_alert_webhook``, its own
task, so a slow webhook never holds the check up.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from console.alerts import notify, services


def _announce(event: services.Event) -> None:
    body = notify.payload(event.kind, event.alert)
    notify.push_to_console(body)
    if event.webhook_url:
        notify.mark_pending(event.alert.pk)
        deliver_alert_webhook.apply_async((event.alert.pk, event.webhook_url, body), expires=3600)


@shared_task(name="console.alerts.tasks.check_lag_alerts", ignore_result=True)
def check_lag_alerts() -> services.CheckSummaryJson:
    """Check every monitored group against its thresholds; return what changed."""
    summary = services.check_all(_announce)
    services.record_check(summary)
    return summary.to_json()


@shared_task(name="console.alerts.tasks.deliver_alert_webhook", ignore_result=True)
def deliver_alert_webhook(alert_id: int, url: str, body: dict[str, Any]) -> str:
    """POST one alert event to its webhook (a few attempts); the outcome is kept on the alert."""
    return notify.deliver_webhook(alert_id, url, body)
