"""Long work can never reach the maintenance worker: every task has one queue, by one rule,
and ``manage.py up`` runs one worker per queue; and the broker.conf ``up`` writes leaves the
broker's maintenance at its default (issue 13)."""

from __future__ import annotations

from pathlib import Path

from console.celery import LONG_QUEUE, MAINTENANCE_QUEUE, REPORTS_QUEUE, app, queue_for
from console.core.processes import Ports, broker_conf_warnings, celery_workers, write_server_confs


def our_tasks() -> dict[str, object]:
    app.loader.import_default_modules()
    app.autodiscover_tasks(
        ["console.maintenance", "console.dlq", "console.reports", "console.alerts"], force=True
    )
    return {name: task for name, task in app.tasks.items() if name.startswith("console.")}


# Every task of the platform and the queue it must run on: a new task is added here too.
EXPECTED_QUEUES = {
    "console.maintenance.tasks.delay_scan_all": MAINTENANCE_QUEUE,
    "console.maintenance.tasks.delay_scan": MAINTENANCE_QUEUE,
    "console.maintenance.tasks.offset_persistence_all": MAINTENANCE_QUEUE,
    "console.maintenance.tasks.file_expiry_all": MAINTENANCE_QUEUE,
    "console.maintenance.tasks.run_job": MAINTENANCE_QUEUE,
    "console.maintenance.tasks.prune_history": MAINTENANCE_QUEUE,
    "console.alerts.tasks.check_lag_alerts": MAINTENANCE_QUEUE,
    "console.alerts.tasks.deliver_alert_webhook": MAINTENANCE_QUEUE,
    "console.reports.tasks.schedule_reports": MAINTENANCE_QUEUE,
    "console.dlq.tasks.long_resend_dlq": LONG_QUEUE,
    "console.reports.tasks.spark_run_report": REPORTS_QUEUE,
}


def test_every_task_is_routed_to_the_queue_of_its_class() -> None:
    tasks = our_tasks()
    assert set(tasks) == set(EXPECTED_QUEUES)
    for name, queue in EXPECTED_QUEUES.items():
        assert app.amqp.router.route({}, name)["queue"].name == queue == queue_for(name), name


def test_up_runs_one_worker_per_queue_one_task_per_slot_and_long_work_niced(tmp_path: Path) -> None:
    workers = {spec.name: spec for spec in celery_workers(tmp_path, long_nice=10)}
    queues = {name: spec.argv[spec.argv.index("-Q") + 1] for name, spec in workers.items()}
    assert queues == {
        "celery-maintenance": MAINTENANCE_QUEUE,
        "celery-long": LONG_QUEUE,
        "celery-reports": REPORTS_QUEUE,
    }
    for spec in workers.values():
        argv = list(spec.argv)
        assert argv[argv.index("--prefetch-multiplier") + 1] == "1" and argv[argv.index("-O") + 1] == "fair"
    nice = {name: spec.nice for name, spec in workers.items()}
    assert nice == {"celery-maintenance": 0, "celery-long": 10, "celery-reports": 10}
    assert app.conf.worker_prefetch_multiplier == 1


def test_up_no_longer_writes_standalone_maintenance_and_warns_of_an_old_false(tmp_path: Path) -> None:
    _namesrv_conf, broker_conf = write_server_confs(tmp_path, Ports(19876, 10911, 8000))
    assert "standaloneMaintenance" not in broker_conf.read_text()  # the broker's default: auto
    assert broker_conf_warnings(broker_conf) == []
    broker_conf.write_text(broker_conf.read_text() + "standaloneMaintenance = false\n")
    (warning,) = broker_conf_warnings(broker_conf)
    assert "standaloneMaintenance = false" in warning and "remove the line" in warning
    write_server_confs(tmp_path, Ports(19876, 10911, 8000))  # the user's line is kept as it is
    assert broker_conf_warnings(broker_conf)
