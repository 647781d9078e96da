"""Long work can never reach the maintenance worker: every task has one queue, by one rule,
and ``manage.py up`` runs one worker per queue; and the broker.conf ``up`` writes leaves the
broker's maintenance at its default (issue 13)."""

from __future__ import annotations

from pathlib import Path

from console.celery import LONG_QUEUE, MAINTENANCE_QUEUE, app, queue_for
from console.core.processes import Ports, broker_conf_warnings, celery_workers, write_server_confs


def our_tasks() -> dict[str, object]:
    app.loader.import_default_modules()
    app.autodiscover_tasks(
        ["console.maintenance", "console.dlq", "console.reports", "console.alerts"], force=True
    )
    return {name: task for name, task in app.tasks.items() if name.startswith("console.")}


def test_every_task_is_routed_to_the_queue_of_its_class() -> None:
    tasks = our_tasks()
    assert {"console.reports.tasks.long_run_report", "console.dlq.tasks.long_resend_dlq"} <= set(tasks)
    assert "console.maintenance.tasks.delay_scan" in tasks
    for name in tasks:
        route = app.amqp.router.route({}, name)
        expected = LONG_QUEUE if name.rsplit(".", 1)[-1].startswith("long_") else MAINTENANCE_QUEUE
        assert route["queue"].name == expected == queue_for(name), name


def test_up_runs_one_worker_per_queue_one_task_per_slot_and_long_work_niced(tmp_path: Path) -> None:
    workers = {spec.name: spec for spec in celery_workers(tmp_path, long_nice=10)}
    assert set(workers) == {"celery-maintenance", "celery-long"}
    queues = {name: spec.argv[spec.argv.index("-Q") + 1] for name, spec in workers.items()}
    assert queues == {"celery-maintenance": MAINTENANCE_QUEUE, "celery-long": LONG_QUEUE}
    for spec in workers.values():
        argv = list(spec.argv)
        assert argv[argv.index("--prefetch-multiplier") + 1] == "1" and argv[argv.index("-O") + 1] == "fair"
    assert (workers["celery-maintenance"].nice, workers["celery-long"].nice) == (0, 10)
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
