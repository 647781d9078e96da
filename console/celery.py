"""The platform's Celery app: Redis carries the tasks, beat drives the broker maintenance.

Work comes in three classes that never share a worker: time-critical maintenance (the
``maintenance`` queue), long work an operator waits for (the ``long`` queue: every task
named ``long_*``, e.g. a DLQ redrive) and Spark reports (the ``reports`` queue: every task
named ``spark_*``), which may run for minutes and must hold up neither.  ``manage.py up``
runs one worker per queue (console/core/processes.py) and beat; by hand: ``celery -A
console worker -Q <queue>`` for each queue, and ``celery -A console beat``.  Settings come
from Django's ``CELERY_*`` settings; the beat schedule below from ``settings.QUIVER``
(``console.quiver.platform_settings``).
"""

from __future__ import annotations

import os
from datetime import timedelta

from celery import Celery
from celery.signals import beat_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

MAINTENANCE_QUEUE = "maintenance"
LONG_QUEUE = "long"
REPORTS_QUEUE = "reports"
# A task's queue by the start of its function's name; every other task is maintenance.
QUEUE_BY_PREFIX = {"long_": LONG_QUEUE, "spark_": REPORTS_QUEUE}


def queue_for(task_name: str) -> str:
    """The queue of a task: ``long`` for ``long_*`` tasks, ``reports`` for ``spark_*``, else
    ``maintenance``.  The one rule: no long task can reach the maintenance worker."""
    function = task_name.rsplit(".", 1)[-1]
    return next(
        (queue for prefix, queue in QUEUE_BY_PREFIX.items() if function.startswith(prefix)), MAINTENANCE_QUEUE
    )


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
    from console.quiver import platform_settings

    quiver = platform_settings()
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
