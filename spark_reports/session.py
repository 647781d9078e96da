"""The one SparkSession builder of the reports, the tests and the benchmark.

``local[*]`` unless ``SPARK_MASTER`` (or ``master=``) names another; on a local master
everything binds to loopback (Spark otherwise picks the machine's external interface); on
any other the executors get this project's Python packages (``executorenv``).
The ``quiver`` data source is registered on every session returned; session time zone UTC,
so minute and hour buckets are UTC as the console shows them.
"""

from __future__ import annotations

import os
import socket
import sys

from pyspark.sql import SparkSession

from spark_reports.datasource import QuiverDataSource
from spark_reports.executorenv import cluster_settings
from spark_reports.java import ensure_java

DEFAULT_MASTER = "local[*]"


class SparkMasterUnreachable(RuntimeError):
    """A ``spark://`` master that accepts no connection: said at once, in a sentence (Spark
    itself would retry for a minute and then fail with a stopped context)."""


def check_master(master: str, timeout_s: float = 5.0) -> None:
    """Raise ``SparkMasterUnreachable`` unless one of a standalone master's addresses
    (``spark://host:port[,host:port]``) accepts a TCP connection; other masters pass."""
    if not master.startswith("spark://"):
        return
    problems = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return
        except ValueError:
            problems.append(f"{address!r} is not host:port")
        except OSError as exc:
            problems.append(f"{address}: {exc.strerror or exc}")
    raise SparkMasterUnreachable(
        f"the Spark master {master} cannot be reached ({'; '.join(problems)}): start it, or set "
        "SPARK_MASTER to a master that runs"
    )


def get_session(
    app_name: str = "quiver-reports", master: str | None = None, conf: dict[str, str] | None = None
) -> SparkSession:
    """Start (or reuse) the session; raises ``JavaRuntimeMissing`` without a usable Java and
    ``SparkMasterUnreachable`` when a standalone master does not answer."""
    ensure_java()
    master = master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER
    check_master(master)
    builder = SparkSession.builder.appName(app_name).master(master)
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": os.environ.get("QUIVER_SPARK_SHUFFLE_PARTITIONS", "8"),
        "spark.sql.python.filterPushdown.enabled": "true",
        # Arrow batches from the data source and to pandas-free collects.
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if master.startswith("local"):
        # Workers run this interpreter (the venv's: pyarrow, broker_core), not the PATH's.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings["spark.driver.bindAddress"] = "127.0.0.1"
        settings["spark.driver.host"] = "127.0.0.1"
    else:
        # A cluster's workers know nothing of this project: spark_reports/executorenv.py.
        settings.update(cluster_settings())
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("QUIVER_SPARK_LOG_LEVEL", "ERROR"))
    spark.dataSource.register(QuiverDataSource)
    return spark
