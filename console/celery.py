"""The platform's Celery app: Redis carries the tasks, beat drives the broker maintenance.

Work comes in two classes that never share a worker: time-critical maintenance (the
``maintenance`` queue) and long work (the ``long`` queue: every task named ``long_*``).
``manage.py up`` runs one worker per queue (console/core/processes.py) and beat; by hand:
``celery -A console worker -Q maintenance``, ``celery -A console worker -Q long`` and
``celery -A console beat``.  Settings come from Django's ``CELERY_*`` settings; the beat
schedule below from ``settings.QUIVER``.
"""

from __future__ import annotations

import os
from datetime import timedelta

from celery import Celery
from celery.signals import beat_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

MAINTENANCE_QUEUE = "maintenance"
LONG_QUEUE = "long"
LONG_TASK_PREFIX = "long_"


def queue_for(task_name: str) -> str:
    """The queue of a task: ``long`` for long work (its function is named ``long_*``), else
    ``maintenance``.  The one rule: a long task can never reach the maintenance worker."""
    return LONG_QUEUE if task_name.rsplit(".", 1)[-1].startswith(LONG_TASK_PREFIX) else MAINTENANCE_QUEUE


def route_task(name: str, *args: object, **kwargs: object) -> dict[str, str]:
    """Celery's router (``CELERY_TASK_ROUTES``): every task to ``queue_for(name)``."""
    return {"queue": queue_for(name)}


app = Celery("quiver")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _schedule(sender: Celery, **kwargs: object) -> None:
    """The beat schedule: each entry fans out to every broker the nameservers know.

    The delay scan's beat entry is only a safety net: each broker's scan reschedules
    itself for its next due message (console/maintenance/services.py).
    """
    from django.conf import settings

    quiver = settings.QUIVER
    schedule = {
        "delay-scan-safety-net": ("console.maintenance.tasks.delay_scan_all", timedelta(seconds=1)),
        "offset-persistence": (
            "console.maintenance.tasks.offset_persistence_all",
            timedelta(seconds=quiver["OFFSET_PERSIST_SECONDS"]),
        ),
        "file-expiry-check": (
            "console.maintenance.tasks.file_expiry_all",
            timedelta(seconds=quiver["EXPIRY_CHECK_SECONDS"]),
        ),
        "history-retention": ("console.maintenance.tasks.prune_history", timedelta(hours=1)),
        "lag-alerts": (
            "console.alerts.tasks.check_lag_alerts",
            timedelta(seconds=quiver["ALERT_CHECK_SECONDS"]),
        ),
    }
    if quiver["REPORT_SCHEDULE_MINUTES"]:  # the Spark reports of the last period (0: never)
        schedule["reports"] = (
            "console.reports.tasks.schedule_reports",
            timedelta(minutes=quiver["REPORT_SCHEDULE_MINUTES"]),
        )
    for name, (task, every) in schedule.items():
        # Expire a beat message that waited longer than its period: the next one replaces it.
        sender.conf.beat_schedule[name] = {
            "task": task,
            "schedule": every,
            "options": {"expires": every.total_seconds()},
        }


@beat_init.connect
def _run_each_job_at_start(sender: object, **kwargs: object) -> None:
    """Send every scheduled job once when beat starts: a timedelta entry's first run would
    otherwise wait a whole period (an hour for the history retention)."""
    for entry in app.conf.beat_schedule.values():
        app.send_task(entry["task"], **entry.get("options", {}))
