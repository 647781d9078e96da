"""The reports' console side: runs over REST and on pages, as each persona, with real Parquet
tables written here with pyarrow in the layout spark_reports/outputs.py fixes (viewing,
downloads and comparisons need no Spark), the schedule's windows, and a group's lag trend
from offset-history files."""

from __future__ import annotations

import csv
import datetime as dt
import io
import uuid
import zipfile
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.test import Client

from console.audit.models import AuditEntry
from console.groups.services import lag_trend
from console.maintenance import history
from console.reports import runner, services, warm
from console.reports.models import ReportRun
from nameserver.clusters import find_cluster
from spark_reports.outputs import LAG_TABLES, TRAFFIC_TABLES, write_summary

from .conftest import Servers

pytestmark = pytest.mark.django_db

API = "/api/clusters/default/reports/"
PAGES = "/clusters/default/reports/"
T0 = 1_780_000_020_000 // 60_000 * 60_000  # a whole minute


def at(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


@pytest.fixture
def reports_dir(tmp_path: Path, settings: Any) -> Path:
    settings.QUIVER = {**settings.QUIVER, "REPORTS_DIR": str(tmp_path / "reports")}
    return tmp_path / "reports"


def write_table(run_dir: Path, name: str, columns: tuple[str, ...], rows: list[dict], parts: int = 1) -> None:
    """Write ``rows`` as ``parts`` part files, columns in the contract's order."""
    (run_dir / name).mkdir(parents=True, exist_ok=True)
    (run_dir / name / "_SUCCESS").write_text("")
    size = max(1, -(-len(rows) // parts))
    for i in range(parts):
        chunk = rows[i * size : (i + 1) * size]
        table = (
            pa.Table.from_pylist(chunk) if chunk else pa.table({c: pa.array([], pa.int64()) for c in columns})
        )
        pq.write_table(table.select(list(columns)), run_dir / name / f"part-{i:05d}.parquet")


def traffic_run(reports_dir: Path, scale: int, parts: int = 1) -> ReportRun:
    """A succeeded traffic run: topics A (3 minutes) and B (1 minute), ``scale`` x messages."""
    run = ReportRun(kind="traffic", cluster="default", params={"since": T0, "until": T0 + 3_600_000})
    run.output = str(reports_dir / str(run.id))
    out = Path(run.output)
    minutes = [("A", 0, 10), ("A", 1, 20), ("A", 2, 5), ("B", 1, 7)]
    minute_rows = [
        {
            "topic": t,
            "minute": at(T0 + m * 60_000),
            "messages": n * scale,
            "bytes": n * scale * 100,
            "avg_size": 100.0,
            "max_size": 120,
            "producers": 1,
        }
        for t, m, n in minutes
    ]
    write_table(out, "topic_minute", TRAFFIC_TABLES["topic_minute"], minute_rows, parts)
    hour_rows = [
        {**r, "hour": at(T0), "messages": sum(x["messages"] for x in minute_rows if x["topic"] == r["topic"])}
        for r in minute_rows
        if r["minute"] == at(T0 + 60_000)
    ]
    for r in hour_rows:
        r["bytes"] = r["messages"] * 100
    write_table(out, "topic_hour", TRAFFIC_TABLES["topic_hour"], hour_rows)
    write_table(
        out,
        "top_tags",
        TRAFFIC_TABLES["top_tags"],
        [{"topic": "A", "tag": "TagA", "messages": 35 * scale, "bytes": 3500 * scale, "rank": 1}],
    )
    write_table(
        out,
        "top_producers",
        TRAFFIC_TABLES["top_producers"],
        [{"topic": "A", "producer": "10.0.0.9", "messages": 35 * scale, "bytes": 3500 * scale, "rank": 1}],
    )
    write_table(
        out,
        "consumption_minute",
        TRAFFIC_TABLES["consumption_minute"],
        [{"group": "G", "topic": "A", "minute": at(T0), "consumed": 9 * scale}],
    )
    summary = {
        "kind": "traffic",
        "cluster": "default",
        "since": run.since,
        "until": run.until,
        "inputRows": 42 * scale,
        "inputBytes": 4200 * scale,
        "durationSeconds": 3.5,
        "topics": ["A", "B"],
        "messages": 42 * scale,
        "bytes": 4200 * scale,
        "producers": 1,
        "consumed": 9 * scale,
        "peakMinute": {"minute": T0 + 60_000, "messages": 27 * scale},
        "peakByTopic": {"A": {"minute": T0 + 60_000, "messages": 20 * scale}},
        "retryMessages": 0,
        "dlqMessages": 0,
        "retryShare": 0.0,
        "dlqShare": 0.0,
    }
    write_summary(out, summary)
    run.status, run.summary = ReportRun.SUCCEEDED, summary
    run.input_rows, run.input_bytes = summary["inputRows"], summary["inputBytes"]
    run.save()
    return run


def lag_run(reports_dir: Path, last_lag: int) -> ReportRun:
    run = ReportRun(kind="lag", cluster="default", params={"since": T0, "until": T0 + 600_000})
    run.output = str(reports_dir / str(run.id))
    out = Path(run.output)
    write_table(out, "lag_queue", LAG_TABLES["lag_queue"], [])
    group_rows = [
        {
            "ts": at(T0 + i * 5000),
            "group": "G",
            "topic": "A",
            "lag": i * 10,
            "seconds_behind": float(i),
            "consume_rate": 1.0,
            "produce_rate": 3.0,
            "drain_seconds": None,
        }
        for i in range(4)
    ]
    write_table(out, "lag_group", LAG_TABLES["lag_group"], group_rows)
    trend = {
        "group": "G",
        "topic": "A",
        "samples": 4,
        "first_lag": 0,
        "last_lag": last_lag,
        "max_lag": last_lag,
        "max_seconds_behind": 3.0,
        "lag_slope_per_minute": 120.0,
        "consume_rate": 1.0,
        "produce_rate": 3.0,
        "drain_seconds": None,
        "growing": True,
        "stalled": False,
    }
    write_table(out, "lag_trend", LAG_TABLES["lag_trend"], [trend])
    summary = {
        "kind": "lag",
        "cluster": "default",
        "since": run.since,
        "until": run.until,
        "inputRows": 4,
        "inputBytes": 400,
        "durationSeconds": 2.0,
        "groups": 1,
        "growing": [{"group": "G", "topic": "A", "lastLag": last_lag, "slopePerMinute": 120.0}],
        "stalled": [],
        "worst": [{"group": "G", "topic": "A", "lag": last_lag, "secondsBehind": 3.0}],
    }
    write_summary(out, summary)
    run.status, run.summary = ReportRun.SUCCEEDED, summary
    run.save()
    return run


def test_runs_are_listed_for_viewers_and_filtered(reports_dir: Path, personas: dict[str, Client]) -> None:
    traffic_run(reports_dir, 1)
    lag_run(reports_dir, 30)
    ReportRun.objects.create(kind="lag", cluster="default", params={"since": 1, "until": 2}, status="failed")
    body = personas["viewer"].get(API).json()
    assert body["count"] == 3 and [r["kind"] for r in body["results"]] == ["lag", "lag", "traffic"]
    assert personas["viewer"].get(API + "?kind=lag&status=succeeded").json()["count"] == 1
    assert personas["viewer"].get(API + "?page_size=1&page=2").json()["results"][0]["kind"] == "lag"
    assert personas["viewer"].get(API + "?kind=nope").status_code == 400
    assert personas["outsider"].get(API).status_code == 403
    assert personas["anonymous"].get(API).status_code in (401, 403)
    assert personas["viewer"].get("/api/clusters/nope/reports/").status_code == 404


def test_asking_for_a_run_is_validated_and_for_operators(
    on_servers: Servers, personas: dict[str, Client], reports_dir: Path
) -> None:
    op = personas["operator"]
    now = services.now_ms()

    def post(client: Client, body: dict) -> Any:
        return client.post(API, body, content_type="application/json")

    assert post(personas["viewer"], {"kind": "traffic", "lastMinutes": 60}).status_code == 403
    for bad, words in (
        ({"kind": "volume", "lastMinutes": 60}, "kind"),
        ({"kind": "lag", "since": now, "until": now - 1}, "before"),
        ({"kind": "lag", "since": now - 40 * 86_400_000, "until": now}, "at most 31 days"),
        ({"kind": "lag"}, "period"),
        ({"kind": "lag", "lastMinutes": 60, "since": 5}, "not both"),
        ({"kind": "traffic", "lastMinutes": 60, "topics": ["NoSuchTopicHere"]}, "NoSuchTopicHere"),
        ({"kind": "traffic", "lastMinutes": 60, "topics": ["bad name!"]}, "topic"),
    ):
        response = post(op, bad)
        assert response.status_code == 400, (bad, response.content)
        assert words in response.content.decode(), (bad, response.content)
    assert ReportRun.objects.count() == 0


def test_a_run_asked_for_is_queued_and_audited(
    on_servers: Servers, personas: dict[str, Client], reports_dir: Path, console_redis: Any
) -> None:
    op = personas["operator"]
    op.post(
        "/api/clusters/default/topics/",
        {"name": "ReportTopic", "readQueueNums": 1, "writeQueueNums": 1},
        content_type="application/json",
    )
    response = op.post(
        API,
        {"kind": "traffic", "lastMinutes": 30, "topics": ["ReportTopic"]},
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert (
        body["status"] == "queued" and body["topics"] == ["ReportTopic"] and body["requestedBy"] == "operator"
    )
    assert body["until"] - body["since"] == 30 * 60_000 and body["scheduled"] is False
    run = ReportRun.objects.get(id=body["id"])
    assert run.output == f"{reports_dir}/{run.id}"
    # On the reports queue, named after the run, for the reports worker to pick up.
    queued = [orjson.loads(m) for m in console_redis.lrange("reports", 0, -1)]
    assert [m["headers"]["id"] for m in queued] == [str(run.id)]
    assert queued[0]["headers"]["task"] == "console.reports.tasks.spark_run_report"
    entry = AuditEntry.objects.get(action="report.run")
    assert entry.result == "ok" and entry.username == "operator" and entry.after["run"] == str(run.id)
    assert personas["viewer"].get(body["url"]).json()["status"] == "queued"
    # Its tables are not there until it has succeeded.
    table = personas["viewer"].get(f"{API}{run.id}/tables/topic_minute/")
    assert table.status_code == 409


def test_table_rows_and_downloads_come_from_the_parquet_files(
    reports_dir: Path, personas: dict[str, Client]
) -> None:
    run = traffic_run(reports_dir, 1, parts=2)
    viewer = personas["viewer"]
    detail = viewer.get(f"{API}{run.id}/").json()
    assert detail["summary"]["messages"] == 42 and detail["inputRows"] == 42
    assert sorted(detail["tables"]) == sorted(TRAFFIC_TABLES)
    rows = viewer.get(detail["tables"]["topic_minute"]["rows"] + "?limit=3&offset=0").json()
    assert rows["count"] == 4 and rows["columns"] == list(TRAFFIC_TABLES["topic_minute"])
    assert [(r["topic"], r["minute"], r["messages"]) for r in rows["rows"]] == [
        ("A", T0, 10),
        ("A", T0 + 60_000, 20),
        ("A", T0 + 120_000, 5),
    ]
    rest = viewer.get(f"{API}{run.id}/tables/topic_minute/?limit=3&offset=3").json()["rows"]
    assert [(r["topic"], r["messages"]) for r in rest] == [("B", 7)]
    assert viewer.get(f"{API}{run.id}/tables/topic_minute/?limit=x").status_code == 400
    assert viewer.get(f"{API}{run.id}/tables/lag_trend/").status_code == 404
    assert viewer.get(f"{API}{uuid.uuid4()}/").status_code == 404

    csv_file = viewer.get(f"{API}{run.id}/tables/topic_minute/csv/")
    assert csv_file["Content-Type"] == "text/csv" and "attachment" in csv_file["Content-Disposition"]
    parsed = list(csv.DictReader(io.StringIO(csv_file.content.decode())))
    assert [int(r["messages"]) for r in parsed] == [10, 20, 5, 7]
    assert list(parsed[0]) == list(TRAFFIC_TABLES["topic_minute"])

    # Two part files: a zip of both; one part file: the file itself.
    zipped = viewer.get(f"{API}{run.id}/tables/topic_minute/parquet/")
    assert zipped["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(zipped.content)) as archive:
        names = sorted(archive.namelist())
        assert names == ["topic_minute/part-00000.parquet", "topic_minute/part-00001.parquet"]
        total = sum(pq.read_table(io.BytesIO(archive.read(n))).num_rows for n in names)
    assert total == 4
    single = viewer.get(f"{API}{run.id}/tables/top_tags/parquet/")
    assert single["Content-Disposition"].endswith('.parquet"')
    assert pq.read_table(io.BytesIO(single.content)).to_pylist()[0]["tag"] == "TagA"
    # Another cluster's URL does not reach the run.
    assert viewer.get(f"/api/clusters/other/reports/{run.id}/").status_code == 404


def test_two_runs_compare_figure_by_figure_and_per_topic(
    reports_dir: Path, personas: dict[str, Client]
) -> None:
    a, b = traffic_run(reports_dir, 1), traffic_run(reports_dir, 3)
    body = personas["viewer"].get(f"{API}compare/?a={a.id}&b={b.id}").json()
    figures = {f["figure"]: f for f in body["figures"]}
    assert figures["messages"] == {"figure": "messages", "a": 42, "b": 126, "delta": 84, "percent": 200.0}
    assert figures["retryShare"]["delta"] == 0.0 and figures["retryShare"]["percent"] is None
    topics = {t["topic"]: t for t in body["topics"]}
    assert topics["A"]["messages"] == {"a": 35, "b": 105, "delta": 70, "percent": 200.0}
    assert topics["B"]["messages"]["delta"] == 14 and [t["topic"] for t in body["topics"]] == ["A", "B"]
    assert body["groups"] == [
        {"group": "G", "topic": "A", "consumed": {"a": 9, "b": 27, "delta": 18, "percent": 200.0}}
    ]
    la, lb = lag_run(reports_dir, 30), lag_run(reports_dir, 90)
    lag = personas["viewer"].get(f"{API}compare/?a={la.id}&b={lb.id}").json()
    assert lag["groups"][0]["last_lag"] == {"a": 30, "b": 90, "delta": 60, "percent": 200.0}
    assert {f["figure"]: f["b"] for f in lag["figures"]}["growing"] == 1
    mixed = personas["viewer"].get(f"{API}compare/?a={a.id}&b={la.id}")
    assert mixed.status_code == 400 and "cannot be compared" in mixed.json()["detail"]
    assert personas["viewer"].get(f"{API}compare/?a={a.id}").status_code == 400
    assert personas["viewer"].get(f"{API}compare/?a={a.id}&b=nope").status_code == 404
    page = personas["viewer"].get(f"{PAGES}compare/?a={a.id}&b={b.id}").content.decode()
    assert 'id="compare-figures"' in page and "200 %" in page and "producer connections" in page


def test_report_pages_show_runs_charts_tables_and_links(
    reports_dir: Path, personas: dict[str, Client]
) -> None:
    run, other = traffic_run(reports_dir, 1), traffic_run(reports_dir, 2)
    viewer = personas["viewer"]
    listing = viewer.get(PAGES).content.decode()
    assert (
        f"{PAGES}{run.id}/" in listing and 'id="run-form"' not in listing and 'id="compare-link"' in listing
    )
    assert 'id="run-form"' in personas["operator"].get(PAGES).content.decode()
    assert f'href="{PAGES}"' in viewer.get("/clusters/default/").content.decode()  # in the navigation
    page = viewer.get(f"{PAGES}{run.id}/?tab=tables&table=top_producers").content.decode()
    assert 'id="tab-tables" data-tab-panel="tables" >' in page or 'data-tab-panel="tables" >' in page
    assert "10.0.0.9" in page and 'id="copy-link"' in page and f'value="{other.id}"' in page
    assert f"/api/clusters/default/reports/{run.id}/tables/consumption_minute/csv/" in page
    assert "echarts.min.js" in page and 'id="report-charts"' in page
    charts = viewer.get(f"{PAGES}{run.id}/?tab=charts").context["charts"]
    assert charts["messages"] == {
        "A": [[T0, 10], [T0 + 60_000, 20], [T0 + 120_000, 5]],
        "B": [[T0 + 60_000, 7]],
    }
    assert charts["consumed"] == {"G @ A": [[T0, 9]]}
    lag = lag_run(reports_dir, 30)
    lag_page = viewer.get(f"{PAGES}{lag.id}/?tab=charts")
    assert lag_page.context["charts"]["lag"] == {"G @ A": [[T0 + i * 5000, i * 10] for i in range(4)]}
    assert "growing" in lag_page.content.decode() and 'id="lag-trend"' in lag_page.content.decode()
    assert personas["outsider"].get(f"{PAGES}{run.id}/").status_code == 403
    assert viewer.get(f"{PAGES}{uuid.uuid4()}/").status_code == 404
    failed = ReportRun.objects.create(
        kind="lag", cluster="default", params={"since": 1, "until": 2}, status="failed", error="no Java here"
    )
    assert 'id="run-error"' in viewer.get(f"{PAGES}{failed.id}/").content.decode()
    queued = ReportRun.objects.create(kind="lag", cluster="default", params={"since": 1, "until": 2})
    running = viewer.get(f"{PAGES}{queued.id}/").content.decode()
    assert f'data-ws="/ws/clusters/default/reports/{queued.id}/"' in running


def test_the_page_form_runs_a_report(
    on_servers: Servers, personas: dict[str, Client], reports_dir: Path, console_redis: Any
) -> None:
    assert personas["viewer"].post(PAGES + "run/", {"kind": "lag", "period": "1h"}).status_code == 403
    bad = personas["operator"].post(PAGES + "run/", {"kind": "lag", "period": "custom"}, follow=True)
    assert b"not run:" in bad.content and ReportRun.objects.count() == 0
    done = personas["operator"].post(PAGES + "run/", {"kind": "lag", "period": "6h"})
    run = ReportRun.objects.get()
    assert done.status_code == 302 and done["Location"] == f"{PAGES}{run.id}/"
    assert run.until - run.since == 360 * 60_000 and run.requested_by.username == "operator"


def test_scheduled_runs_cover_the_last_period_once(
    reports_dir: Path, settings: Any, db: None, tmp_path: Path
) -> None:
    history_dir = tmp_path / "history"
    settings.QUIVER = {
        **settings.QUIVER,
        "REPORT_SCHEDULE_MINUTES": 60,
        "REPORT_WINDOW_MINUTES": 0,
        "HISTORY_DIR": history_dir,
    }
    at_ms = T0 + 25 * 60_000
    # A period the platform did not watch (no history of the cluster): no empty report.
    assert services.plan_scheduled(at_ms) == []
    watched_at = at_ms // 3_600_000 * 3_600_000 - 30 * 60_000  # in the last whole hour
    day = history_dir / "counters" / f"date={history.partition_date(watched_at)}"
    day.mkdir(parents=True)
    row = {"ts": watched_at, "cluster": "default", "kind": "put", "topic": "T", "group": "", "total": 1}
    (day / "broker-a.jsonl").write_bytes(orjson.dumps(row) + b"\n")
    first = services.plan_scheduled(at_ms)
    assert sorted(r.kind for r in first) == ["lag", "traffic"]
    hour = at_ms // 3_600_000 * 3_600_000
    assert {(r.since, r.until, r.scheduled, r.requested_by) for r in first} == {
        (hour - 3_600_000, hour, True, None)
    }
    assert services.plan_scheduled(at_ms + 60_000) == []  # the same window: nothing new
    assert len(services.plan_scheduled(at_ms + 3_600_000)) == 2  # the next one
    settings.QUIVER = {**settings.QUIVER, "REPORT_SCHEDULE_MINUTES": 0}
    assert services.plan_scheduled(at_ms + 7_200_000) == []


def test_protocol_lines_and_failure_messages() -> None:
    assert runner.parse('{"event":"progress","stagesDone":1,"stagesTotal":4}\n') == {
        "event": "progress",
        "stagesDone": 1,
        "stagesTotal": 4,
    }
    assert runner.parse("25/11/24 INFO SparkContext: Running Spark") is None
    assert runner.parse('{"no": "event"}') is None
    java = runner.Outcome(returncode=1)
    java.stderr.append("JAVA_HOME is not set")
    assert java.message(60).startswith("Spark needs a Java runtime")
    assert runner.Outcome(timed_out=True).message(60) == "the report took longer than 60 s and was stopped"
    silent = runner.Outcome(returncode=3)
    silent.stderr.append("Traceback: boom")
    assert "exit status 3" in silent.message(60) and "boom" in silent.message(60)


def test_group_lag_trend_reads_the_offset_history(tmp_path: Path) -> None:
    day = dt.datetime.fromtimestamp(T0 / 1000, tz=dt.UTC).date().isoformat()
    folder = tmp_path / "offsets" / f"date={day}"
    folder.mkdir(parents=True)
    rows = []
    for i, (consumer, end) in enumerate([(0, 10), (5, 30), (30, 30)]):
        for queue in (0, 1):
            rows.append(
                {
                    "ts": T0 + i * 60_000 + 1000,
                    "cluster": "default",
                    "broker": "broker-a",
                    "broker_addr": "x",
                    "group": "G",
                    "topic": "A",
                    "queue_id": queue,
                    "consumer_offset": consumer,
                    "broker_offset": end,
                    "min_offset": 0,
                    "store_timestamp": T0 - 4000 + i * 60_000,
                }
            )
    rows.append({**rows[0], "group": "Other"})
    rows.append({**rows[0], "cluster": "elsewhere"})
    (folder / "broker-a.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows) + b'{"torn')
    trend = lag_trend(tmp_path, "default", "G", 1, T0 + 180_000)
    assert trend["lag"] == {"A": [[T0, 20], [T0 + 60_000, 50], [T0 + 120_000, 0]]}
    assert trend["secondsBehind"] == {"A": [[T0, 5.0], [T0 + 60_000, 5.0], [T0 + 120_000, 0.0]]}
    later = T0 + 10 * 3_600_000
    empty = {"lag": {}, "secondsBehind": {}, "since": later - 3_600_000, "until": later}
    assert lag_trend(tmp_path, "default", "G", 1, later) == empty  # the window, for the chart's axis


def test_the_group_page_shows_its_lag_trend(
    on_servers: Servers, personas: dict[str, Client], settings: Any, tmp_path: Path
) -> None:
    settings.QUIVER = {**settings.QUIVER, "HISTORY_DIR": tmp_path}
    now = services.now_ms()
    folder = tmp_path / "offsets" / f"date={at(now).date().isoformat()}"
    folder.mkdir(parents=True)
    row = {
        "ts": now - 60_000,
        "cluster": "default",
        "broker": "broker-a",
        "broker_addr": "x",
        "group": "TrendGroup",
        "topic": "A",
        "queue_id": 0,
        "consumer_offset": 3,
        "broker_offset": 10,
        "min_offset": 0,
        "store_timestamp": now - 70_000,
    }
    (folder / "broker-a.jsonl").write_bytes(orjson.dumps(row) + b"\n")
    personas["operator"].post("/clusters/default/groups-new/", {"name": "TrendGroup"})
    page = personas["viewer"].get("/clusters/default/groups/TrendGroup/?hours=2")
    assert page.context["lag_trend"]["lag"] == {"A": [[(now - 60_000) // 60_000 * 60_000, 7]]}
    assert page.context["trend_hours"] == 2 and b'id="lag-trend-lag"' in page.content


@pytest.mark.slow
def test_a_run_that_cannot_reach_its_cluster_fails_with_the_reason(
    reports_dir: Path, settings: Any, personas: dict[str, Client], tmp_path: Path
) -> None:
    settings.QUIVER = {**settings.QUIVER, "NAMESRV_ADDR": "127.0.0.1:1", "DATA_DIR": tmp_path}
    now = services.now_ms()
    run = services.create_run(find_cluster("default"), services.check_request("traffic", now - 60_000, now))
    done = runner.execute(str(run.id))  # the real python -m spark_reports, as the task runs it
    assert done is not None and done.status == "failed" and done.finished is not None
    assert done.error.startswith("cannot reach the cluster at 127.0.0.1:1"), done.error
    assert "Traceback" not in done.error and done.summary is None
    assert runner.execute(str(run.id)) is None  # a finished run is not run again
    # The whole story is in the run's log, which the run page links to.
    page = personas["viewer"].get(f"{PAGES}{run.id}/").content.decode()
    assert f'href="{PAGES}{run.id}/log/" id="run-log"' in page
    log = personas["viewer"].get(f"{PAGES}{run.id}/log/")
    assert log.status_code == 200 and log["Content-Type"].startswith("text/plain")
    text = log.content.decode()
    assert text.startswith("$ ") and "spark_reports traffic" in text
    assert "[exit status 1] cannot reach the cluster at 127.0.0.1:1" in text
    assert personas["outsider"].get(f"{PAGES}{run.id}/log/").status_code == 403
    assert personas["viewer"].get(f"{PAGES}{uuid.uuid4()}/log/").status_code == 404
    warm.stop_all()  # the warm Spark session the run started (the platform's default)


@pytest.mark.django_db(transaction=True)
async def test_the_run_socket_follows_progress_until_the_end(
    reports_dir: Path, personas: dict[str, Client]
) -> None:
    from asgiref.sync import sync_to_async
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator
    from django.contrib.auth import get_user_model

    from console.routing import websocket_urlpatterns

    run = await sync_to_async(ReportRun.objects.create)(
        kind="lag", cluster="default", params={"since": 1, "until": 2}
    )

    async def connect(path: str, username: str) -> tuple[WebsocketCommunicator, bool]:
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
        communicator.scope["user"] = await sync_to_async(get_user_model().objects.get)(username=username)
        connected, _ = await communicator.connect()
        return communicator, connected

    _, refused = await connect(f"/ws/clusters/default/reports/{run.id}/", "outsider")
    assert not refused
    missing, _ = await connect(f"/ws/clusters/default/reports/{uuid.uuid4()}/", "viewer")
    assert (await missing.receive_output(timeout=5))["type"] == "websocket.close"
    socket, connected = await connect(f"/ws/clusters/default/reports/{run.id}/", "viewer")
    assert connected
    first = await socket.receive_json_from(timeout=5)
    assert first["status"] == "queued" and first["stagesTotal"] == 0

    def progress(done: int, total: int, status: str = ReportRun.RUNNING) -> None:
        run.status, run.stages_done, run.stages_total = status, done, total
        run.save()
        runner.push(run)  # what the task does on each progress line

    await sync_to_async(progress)(2, 5)
    update = await socket.receive_json_from(timeout=5)
    assert (update["status"], update["stagesDone"], update["stagesTotal"], update["percent"]) == (
        "running",
        2,
        5,
        40.0,
    )
    await sync_to_async(progress)(5, 5, ReportRun.SUCCEEDED)
    assert (await socket.receive_json_from(timeout=5))["status"] == "succeeded"
    assert (await socket.receive_output(timeout=5))["type"] == "websocket.close"


# --- how report tables read: times, figures, paging, sorting ------------------------------


def test_report_times_and_figures_are_formatted_one_way() -> None:
    from console.reports import display

    minute = T0 + 60_000
    shown = at(minute).strftime("%Y-%m-%d %H:%M UTC")
    # Epoch ms (what summaries and rows carry), a datetime, or the ISO text older runs kept.
    assert display.format_time(minute) == shown
    assert display.format_time(at(minute)) == shown
    assert display.format_time(at(minute).isoformat().replace("+00:00", "Z")) == shown
    assert display.format_time(minute + 5_000).endswith(":05 UTC")
    assert display.format_time(minute + 5_250).endswith(":05 UTC")
    assert display.format_time(None) == display.format_time("") == display.format_time("soon") == ""
    assert display.as_epoch_ms("2026-11-26T03:39:00Z") == 1_795_664_340_000
    assert [display.format_number(v) for v in (12_345, 35.68032786885246, 1_234.5, 100.0, 1.25, 0.0523)] == [
        "12,345",
        "35.7",
        "1,234",
        "100",
        "1.25",
        "0.052",
    ]
    assert display.format_number(0.0) == "0" and display.format_number(None) == ""
    assert display.format_number(float("nan")) == "" and display.format_number(True) == "yes"
    assert display.format_percent(0.02347) == "2.35 %" and display.format_percent(0) == "0 %"
    assert display.paging_text(0, 19, 19) == "rows 1–19 of 19"
    assert display.paging_text(100, 100, 12_345) == "rows 101–200 of 12,345"
    assert display.paging_text(0, 0, 0) == "no rows"
    assert "first page" in display.paging_text(500, 0, 19)
    assert display.default_sort(list(TRAFFIC_TABLES["topic_minute"])) == ("messages", True)
    assert display.default_sort(list(LAG_TABLES["lag_trend"])) == ("last_lag", True)
    assert display.default_sort(["topic", "tag"]) == (None, False)
    assert display.parse_sort(["topic", "messages"], "topic", "asc") == ("topic", False)
    assert display.parse_sort(["topic", "messages"], "nope", "asc") == ("messages", True)
    assert display.column_label("producers") == "producer connections"


def test_table_pages_sort_over_the_whole_table(reports_dir: Path, personas: dict[str, Client]) -> None:
    run = traffic_run(reports_dir, 1, parts=2)
    viewer = personas["viewer"]
    url = f"{API}{run.id}/tables/topic_minute/"
    busiest = viewer.get(url + "?limit=2&sort=messages&order=desc").json()
    assert [r["messages"] for r in busiest["rows"]] == [20, 10]
    assert busiest["sort"] == {"column": "messages", "descending": True}
    assert busiest["types"]["minute"] == "time" and busiest["types"]["avg_size"] == "float"
    quietest = viewer.get(url + "?limit=2&offset=2&sort=messages&order=desc").json()
    assert [r["messages"] for r in quietest["rows"]] == [7, 5]  # the order spans both part files
    by_time = viewer.get(url + "?sort=minute&order=asc").json()["rows"]
    assert [r["minute"] for r in by_time] == sorted(r["minute"] for r in by_time)
    assert viewer.get(url + "?sort=nope").status_code == 400
    assert viewer.get(url + "?sort=messages&order=up").status_code == 400
    assert viewer.get(url).json()["sort"] is None  # file order unless asked


def _cells(page: str, column: int) -> list[str]:
    """The text of one column of the page's #table-rows."""
    import re

    body = page.split('id="table-rows"', 1)[1].split("</tbody>", 1)[0].split("<tbody>", 1)[1]
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
    return [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[column] for row in rows]


def test_the_tables_tab_reads_as_a_person_expects(
    reports_dir: Path, personas: dict[str, Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    from console.reports import views

    run = traffic_run(reports_dir, 1)
    out = Path(run.output)
    rows = [
        {
            "topic": f"T{i:02d}",
            "minute": at(T0 + i * 60_000),
            "messages": 1000 * (i + 1),
            "bytes": 1000 * (i + 1) * 36,
            "avg_size": 35.68032786885246,
            "max_size": 120,
            "producers": 2,
        }
        for i in range(19)
    ]
    write_table(out, "topic_minute", TRAFFIC_TABLES["topic_minute"], rows)
    viewer = personas["viewer"]
    page = viewer.get(f"{PAGES}{run.id}/?tab=tables&table=topic_minute").content.decode()
    assert "rows 1–19 of 19" in page
    # Busiest first by default, said by aria-sort; figures with separators, floats rounded.
    assert '<th aria-sort="descending" data-column="messages"' in page
    assert _cells(page, 2)[:3] == ["19,000", "18,000", "17,000"]
    assert set(_cells(page, 4)) == {"35.7"} and "35.68032786885246</td>" not in page
    minutes = _cells(page, 1)
    assert minutes[0] == at(T0 + 18 * 60_000).strftime("%Y-%m-%d %H:%M UTC")
    assert not any(cell.strip().isdigit() for cell in minutes)  # no epoch milliseconds
    assert "producer connections" in page and 'class="table-scroll"' in page
    # A heading's link sorts the whole table its way; the sorted one links to the other way.
    by_topic = viewer.get(f"{PAGES}{run.id}/?tab=tables&table=topic_minute&sort=topic&order=asc")
    text = by_topic.content.decode()
    assert _cells(text, 0)[:2] == ["T00", "T01"] and '<th aria-sort="ascending" data-column="topic"' in text
    assert "sort=topic&amp;order=desc" in text
    # Paging keeps the sort and says where it is.
    monkeypatch.setattr(views, "ROWS_PER_PAGE", 5)
    second = viewer.get(f"{PAGES}{run.id}/?tab=tables&table=topic_minute&sort=topic&order=asc&offset=5")
    text = second.content.decode()
    assert "rows 6–10 of 19" in text and _cells(text, 0)[0] == "T05"
    assert "offset=10" in text and "sort=topic&amp;order=asc&amp;offset=0" in text
    last = viewer.get(f"{PAGES}{run.id}/?tab=tables&table=topic_minute&offset=15").content.decode()
    assert "rows 16–19 of 19" in last and 'id="rows-next"' not in last
    # An empty table says so.
    write_table(out, "consumption_minute", TRAFFIC_TABLES["consumption_minute"], [])
    empty = viewer.get(f"{PAGES}{run.id}/?tab=tables&table=consumption_minute").content.decode()
    assert '<small id="table-paging">no rows</small>' in empty and "The run wrote this table empty" in empty


def test_the_summary_shows_the_peak_minute_and_figures_readably(
    reports_dir: Path, personas: dict[str, Client]
) -> None:
    run = traffic_run(reports_dir, 1000)
    page = personas["viewer"].get(f"{PAGES}{run.id}/").content.decode()
    peak = at(T0 + 60_000).strftime("%Y-%m-%d %H:%M UTC")
    assert f"messages in the minute from {peak}" in page
    assert ">42,000<" in page and ">27,000<" in page and "Producer connections" in page
    assert f'data-sort="{T0 + 60_000}">{peak}</td>' in page  # the per-topic peak, sortable by time
    # A run recorded before summaries carried epoch ms (ISO text) reads the same.
    run.summary = {**run.summary, "peakMinute": {"minute": at(T0 + 60_000).isoformat(), "messages": 5}}
    run.save()
    page = personas["viewer"].get(f"{PAGES}{run.id}/").content.decode()
    assert f"messages in the minute from {peak}" in page
