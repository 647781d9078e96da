"""Celery tasks of the reports: thin shells over runner.py and services.py.

``spark_run_report`` runs on the ``reports`` queue (the ``spark_*`` route), so a Spark job
never holds up the maintenance jobs nor an operator's long task; ``schedule_reports`` is
beat's: it queues each window's runs once (services.plan_scheduled) and fails runs whose
worker died.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from console.reports import runner, services


@shared_task(name="console.reports.tasks.spark_run_report", ignore_result=True, acks_late=False)
def spark_run_report(run_id: str) -> dict[str, Any] | None:
    """Run the queued report ``run_id`` (a child ``python -m spark_reports``) to its end."""
    run = runner.execute(run_id)
    return run.to_json() if run is not None else None


@shared_task(name="console.reports.tasks.schedule_reports", ignore_result=True)
def schedule_reports() -> int:
    """Queue the last schedule period's traffic and lag runs of every cluster (once each)."""
    services.fail_abandoned()
    runs = services.plan_scheduled()
    for run in runs:
        try:
            services.queue_run(run)
        except Exception:  # noqa: BLE001 - the run is marked failed; the others still go
            continue
    return len(runs)
