"""The reports on a real Spark cluster (issue 20): a standalone master and worker started
here from the installed pyspark, whose environment has none of this project (its Python is
the machine's, without pyarrow); both reports run through the Celery task's code with
``SPARK_MASTER`` pointing at it, and their tables equal a ``local`` run's over the same
period.  Also: a worker Python without the packages, and a master that does not answer,
each fail the run with one sentence that names the cause."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.messagequeue import MessageQueue
from console.reports import services, tasks, warm
from console.reports.models import ReportRun
from nameserver.clusters import find_cluster
from spark_reports import datasource
from spark_reports.jobs import lag, traffic
from spark_reports.jobs.common import ReportParams, write_tables
from spark_reports.localcluster import Standalone, standalone_cluster
from spark_reports.outputs import TABLES
from tests.console.conftest import Servers
from tests.servers import free_port, wait_for
from tests.spark.conftest import admin_run, create_topic, record_history

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

TOPIC = "ClusterTopic"
GROUP = "cluster-reader"


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    with standalone_cluster(tmp_path_factory.mktemp("standalone")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def period(cluster: Servers, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Traffic in two topics with tags, a group that consumed part of it, and two history
    snapshots; the period around it."""
    history_dir = tmp_path_factory.mktemp("cluster-history")
    create_topic(cluster, TOPIC, 4)
    create_topic(cluster, TOPIC + "B", 2)
    since = int(time.time() * 1000) - 1
    with Producer("cluster-producer", cluster.namesrv_addr) as producer:
        for i in range(300):
            topic = TOPIC if i % 3 else TOPIC + "B"
            producer.send(Message(topic, b"x" * (20 + i % 200), tags=("a", "b", "c")[i % 3]))
    record_history(cluster, history_dir)

    def dispatched() -> Any:
        # A send is answered before its consume-queue entry is written (as RocketMQ's reput
        # does it): the queues' ends reach the 200 messages sent to TOPIC a moment later.
        stats = admin_run(cluster.namesrv_addr, lambda admin: admin.topic_stats(TOPIC))
        return stats.queues if stats.total_messages == 200 else None

    queues = wait_for(dispatched, 30, f"the messages of {TOPIC} in its queues")
    offsets: dict[MessageQueue, int] = {q.queue: 10 for q in queues}
    admin_run(cluster.namesrv_addr, lambda admin: admin.update_consumer_offsets(GROUP, offsets))
    time.sleep(1.1)
    record_history(cluster, history_dir)
    return {"history": history_dir, "since": since, "until": int(time.time() * 1000) + 1}


@pytest.fixture(autouse=True)
def _warm_sessions_stopped(settings: Any, tmp_path: Path) -> Iterator[None]:
    """Each test's runs in a data directory of its own; its warm Spark session stopped after."""
    settings.QUIVER = {**settings.QUIVER, "DATA_DIR": tmp_path / "data"}
    yield
    warm.stop_all()


def platform_for(settings: Any, cluster: Servers, period: dict[str, Any], reports: Path, master: str) -> None:
    """The console's settings as a platform using ``master`` would have them."""
    settings.QUIVER = {
        **settings.QUIVER,
        "NAMESRV_ADDR": cluster.namesrv_addr,
        "HISTORY_DIR": period["history"],
        "REPORTS_HISTORY_PATH": "",
        "REPORTS_DIR": str(reports),
        "SPARK_MASTER": master,
    }


def run_report(kind: str, period: dict[str, Any]) -> ReportRun:
    """Queue a run and run it as the Celery worker does (the task's own code, in this process)."""
    request = services.check_request(kind, period["since"], period["until"])
    run = services.create_run(find_cluster("default"), request)
    tasks.spark_run_report(str(run.id))
    return ReportRun.objects.get(id=run.id)


def table_rows(path: Path) -> list[dict[str, Any]]:
    rows = pq.read_table(path).to_pylist()
    return sorted(rows, key=lambda row: [repr(row[key]) for key in sorted(row)])


def test_both_reports_run_on_a_standalone_cluster_whose_workers_have_none_of_this(
    spark: SparkSession,
    cluster: Servers,
    standalone: Standalone,
    period: dict[str, Any],
    tmp_path: Path,
    settings: Any,
) -> None:
    platform_for(settings, cluster, period, tmp_path / "reports", standalone.master)
    for kind, job in (("traffic", traffic), ("lag", lag)):
        run = run_report(kind, period)
        assert run.status == ReportRun.SUCCEEDED, f"{kind}: {run.error}"
        # The same report on local[2] (this process's session), written the same way.
        local_out = tmp_path / f"local-{kind}"
        params = ReportParams(
            "default", cluster.namesrv_addr, str(period["history"]), str(local_out), period["since"],
            period["until"],
        )  # fmt: skip
        tables, summary = job.run(spark, params)
        write_tables(str(local_out), tables, TABLES[kind])  # type: ignore[index]
        for name in TABLES[kind]:  # type: ignore[index]
            assert table_rows(Path(run.output) / name) == table_rows(local_out / name), f"{kind}/{name}"
        varying = {"durationSeconds", "kind", "cluster", "since", "until"}
        assert {k: v for k, v in run.summary.items() if k not in varying} == summary
    traffic_summary = ReportRun.objects.get(kind="traffic").summary
    assert traffic_summary["messages"] == 300 and traffic_summary["missingMessages"] == 0
    log = services.run_log(str(run.id)).read_text()
    assert "spark://" in log and "[exit status 0]" in log


def test_a_worker_python_without_the_packages_is_named_as_the_cause(
    cluster: Servers, period: dict[str, Any], tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Spark's workers given the machine's Python and told it has everything (the mistake
    # the issue met): the run fails, and says why in one sentence, with the whole text in
    # the run's log.
    platform_for(settings, cluster, period, tmp_path / "reports", "local[1]")
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3")
    run = run_report("traffic", period)
    assert run.status == ReportRun.FAILED
    source = (Path(datasource.__file__)).read_text().splitlines()
    line = source.index("import pyarrow as pa") + 1
    assert run.error == (
        "the report's Python code failed on a Spark worker: ModuleNotFoundError: No module "
        f"named 'pyarrow' (at spark_reports/datasource.py:{line}, in <module>)"
    ), run.error
    assert "\n" not in run.error and "Traceback" not in run.error, run.error
    log = services.run_log(str(run.id)).read_text()
    assert "Traceback (most recent call last)" in log and "ModuleNotFoundError" in log


def test_a_master_that_does_not_answer_fails_the_run_at_once_with_a_sentence(
    cluster: Servers, period: dict[str, Any], tmp_path: Path, settings: Any
) -> None:
    closed = free_port()
    platform_for(settings, cluster, period, tmp_path / "reports", f"spark://127.0.0.1:{closed}")
    run = run_report("lag", period)
    assert run.status == ReportRun.FAILED
    assert run.error.startswith(f"the Spark master spark://127.0.0.1:{closed} cannot be reached"), run.error
    assert "\n" not in run.error and run.finished is not None
