"""The one SparkSession builder of the reports, the tests and the benchmark.

``local[*]`` unless ``SPARK_MASTER`` (or ``master=``) names another; on a local master
everything binds to loopback (Spark otherwise picks the machine's external interface).
The ``quiver`` data source is registered on every session returned; session time zone UTC,
so minute and hour buckets are UTC as the console shows them.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from spark_reports.datasource import QuiverDataSource
from spark_reports.java import ensure_java

DEFAULT_MASTER = "local[*]"


def get_session(
    app_name: str = "quiver-reports", master: str | None = None, conf: dict[str, str] | None = None
) -> SparkSession:
    """Start (or reuse) the session; raises ``JavaRuntimeMissing`` without a usable Java."""
    ensure_java()
    master = master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER
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
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("QUIVER_SPARK_LOG_LEVEL", "ERROR"))
    spark.dataSource.register(QuiverDataSource)
    return spark
