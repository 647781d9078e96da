"""The OpenAPI document describes what the cluster, broker, ACL, traffic, report,
maintenance, audit and task endpoints return (and the media types of the downloads), and a
real answer from real servers has no field it does not name."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client

from broker_core.broker.groups import SubscriptionGroupConfig
from broker_core.client.admin import AdminClient
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.client.producer.transaction import TransactionProducer
from broker_core.model.maintenance import FILE_EXPIRY, OFFSET_PERSISTENCE
from console.core.brokers import admin_call
from console.maintenance import services as maintenance
from tests.servers import wait_for

from .conftest import Servers, run_servers
from .test_api_schema import answer, fields
from .test_clusters_api import Undecided
from .test_reports import lag_run, traffic_run

pytestmark = pytest.mark.django_db

API = "/api/clusters/default/"
CLUSTER = "/api/clusters/{cluster}/"
REPORTS = CLUSTER + "reports/"
TABLE = REPORTS + "{run_id}/tables/{table}/"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """A nameserver and a broker with aclEnable (loopback white-listed: the console signs
    nothing), so the ACL endpoints answer too."""
    work = tmp_path_factory.mktemp("schema-servers")
    (work / "store" / "config").mkdir(parents=True)
    acl = {
        "globalWhiteRemoteAddresses": ["127.0.0.1"],
        "accounts": [{"accessKey": "rocketmq2", "secretKey": "12345678", "admin": True}],
    }
    (work / "store" / "config" / "plain_acl.yml").write_text(yaml.safe_dump(acl))
    with run_servers(work, aclEnable="true") as found:
        yield found


@pytest.fixture
def schema(personas: dict[str, Client]) -> dict[str, Any]:
    response = personas["viewer"].get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


@pytest.fixture
def reports_dir(tmp_path: Path, settings: Any) -> Path:
    settings.QUIVER = {**settings.QUIVER, "REPORTS_DIR": str(tmp_path / "reports")}
    return tmp_path / "reports"


def media_types(schema: dict[str, Any], path: str, status: str = "200") -> set[str]:
    return set(schema["paths"][path]["get"]["responses"][status]["content"])


def test_the_cluster_and_broker_answers_are_described_field_by_field(schema: dict[str, Any]) -> None:
    assert answer(schema, "/api/clusters/", "get") == "ClusterListOut"
    assert {"name", "namesrvAddr", "role"} <= fields(schema, "ClusterRowOut")
    assert answer(schema, "/api/clusters/", "post", "201") == "ClusterOut"
    assert answer(schema, CLUSTER, "get") == "ClusterOut" == answer(schema, CLUSTER, "put")
    assert answer(schema, CLUSTER, "get", "404") == "ClusterNotFoundOut"
    assert {"name", "namesrv_addr", "description", "created"} <= fields(schema, "ClusterOut")
    assert answer(schema, CLUSTER + "brokers/", "get") == "BrokerListOut"
    assert {"brokerName", "role", "putTps", "diskUsedPercent", "lastHeartbeat", "error"} <= fields(
        schema, "BrokerRowOut"
    )
    config = CLUSTER + "brokers/{addr}/config/"
    assert answer(schema, config, "get") == "BrokerConfigOut" == answer(schema, config, "put")
    assert answer(schema, CLUSTER + "health/", "get") == "HealthOut"
    assert {"check", "ok", "detail"} <= fields(schema, "HealthCheckOut")
    assert answer(schema, CLUSTER + "schedule/", "get") == "ScheduleOut"
    assert {"delayLevels", "halfMessages", "pendingHalfMessages", "error"} <= fields(
        schema, "ScheduleBrokerOut"
    )
    assert {"level", "waiting", "nextDueMs"} <= fields(schema, "DelayLevelOut")
    assert {"producerGroup", "ageMs", "checkBacks"} <= fields(schema, "HalfMessageOut")
    assert answer(schema, CLUSTER + "acl/", "get") == "AclOut"
    assert {"globalWhiteAddrs", "plainAccessConfigs"} <= fields(schema, "AclBrokerOut")
    assert {"accessKey", "secretKey", "topicPerms", "groupPerms"} <= fields(schema, "AclAccountOut")
    assert answer(schema, CLUSTER + "acl/", "post", "201") == "AclAccountSavedOut"
    assert answer(schema, CLUSTER + "acl/whitelist/", "put") == "WhiteListOut"
    assert answer(schema, CLUSTER + "traffic/", "get") == "TrafficOut"
    assert {"date", "by", "asOf", "series", "top"} <= fields(schema, "TrafficOut")
    assert answer(schema, "/api/audit/", "get") == "AuditPageOut"
    assert {"at", "user", "action", "before", "after", "result", "remoteAddr"} <= fields(
        schema, "AuditEntryOut"
    )


def test_the_report_maintenance_and_task_answers_are_described_field_by_field(
    schema: dict[str, Any],
) -> None:
    assert answer(schema, REPORTS, "get") == "ReportRunPageOut"
    assert answer(schema, REPORTS, "post", "202") == "ReportRunQueuedOut"
    assert answer(schema, REPORTS, "post", "503") == "ReportErrorOut"
    assert {"id", "kind", "status", "percent", "summary", "url"} <= fields(schema, "ReportRunQueuedOut")
    assert {"peakMinute", "peakByTopic", "growing", "worst"} <= fields(schema, "ReportSummaryOut")
    assert answer(schema, REPORTS + "{run_id}/", "get") == "ReportRunDetailOut"
    assert answer(schema, REPORTS + "{run_id}/", "get", "404") == "ReportErrorOut"
    assert {"rows", "csv", "parquet"} <= fields(schema, "ReportTableLinksOut")
    assert answer(schema, TABLE, "get") == "ReportTableOut"
    assert answer(schema, TABLE, "get", "409") == "ReportErrorOut"
    assert {"columns", "types", "count", "sort", "rows"} <= fields(schema, "ReportTableOut")
    assert answer(schema, REPORTS + "compare/", "get") == "ReportCompareOut"
    assert {"figure", "a", "b", "delta", "percent"} <= fields(schema, "FigureDeltaOut")
    assert {"consumed", "last_lag", "growing"} <= fields(schema, "GroupDeltaOut")
    jobs = "/api/maintenance/jobs/"
    assert answer(schema, jobs, "get") == "JobOverviewOut"
    assert answer(schema, jobs, "get", "503") == "JobErrorOut"
    assert {"overdue", "failing", "brokers"} <= fields(schema, "JobStatusOut")
    assert {"broker_addr", "status", "driver", "lastRunBy"} <= fields(schema, "JobBrokerRunOut")
    assert {"mode", "jobs", "deletions", "damaged", "diskFull"} <= fields(schema, "BrokerDriversOut")
    assert answer(schema, jobs + "{job}/run/", "post", "202") == "JobQueuedOut"
    assert answer(schema, jobs + "{job}/run/", "post", "404") == "JobErrorOut"
    assert answer(schema, "/api/tasks/", "get") == "TaskListOut"
    assert answer(schema, "/api/tasks/{task_id}/", "get") == "TaskOut"
    assert answer(schema, "/api/tasks/{task_id}/", "get", "404") == "TaskErrorOut"
    assert {"state", "done", "total", "percent", "result", "error"} <= fields(schema, "TaskOut")


def test_the_downloads_declare_their_media_types(schema: dict[str, Any]) -> None:
    assert media_types(schema, TABLE + "csv/") == {"text/csv"}
    assert media_types(schema, TABLE + "parquet/") == {"application/vnd.apache.parquet", "application/zip"}
    assert answer(schema, TABLE + "parquet/", "get", "404") == "ReportErrorOut"
    export = CLUSTER + "groups/{group}/dlq/export/"
    assert media_types(schema, export) == {"text/csv", "application/x-ndjson"}


def test_real_cluster_broker_acl_and_audit_answers_have_only_described_fields(
    on_servers: Servers, personas: dict[str, Client], schema: dict[str, Any]
) -> None:
    admin, op, viewer = personas["admin"], personas["operator"], personas["viewer"]
    listed = viewer.get("/api/clusters/").json()
    assert set(listed) <= fields(schema, "ClusterListOut") and listed["clusters"]
    assert all(set(row) <= fields(schema, "ClusterRowOut") for row in listed["clusters"])
    brokers = viewer.get(API + "brokers/").json()
    assert set(brokers) <= fields(schema, "BrokerListOut") and brokers["brokers"]
    assert all(set(row) <= fields(schema, "BrokerRowOut") for row in brokers["brokers"])
    url = f"{API}brokers/{on_servers.broker_addr}/config/"
    assert set(viewer.get(url).json()) <= fields(schema, "BrokerConfigOut")
    same = admin.put(url, {"changes": {"autoCreateTopicEnable": "true"}}, content_type="application/json")
    assert same.status_code == 200 and set(same.json()) <= fields(schema, "BrokerConfigOut")
    health = viewer.get(API + "health/").json()
    assert set(health) <= fields(schema, "HealthOut") and health["checks"]
    assert all(set(c) <= fields(schema, "HealthCheckOut") for c in health["checks"])

    # A delayed message and an undecided half message, so the schedule lists both.
    op.post(API + "topics/", {"name": "DescribedLater"}, content_type="application/json")
    sent = op.post(
        API + "topics/DescribedLater/messages/",
        {"body": "later", "delayLevel": 18},
        content_type="application/json",
    )
    assert sent.status_code == 201
    producer = TransactionProducer(
        "described-tx", on_servers.namesrv_addr, transaction_listener=Undecided()
    ).start()
    try:
        producer.send_message_in_transaction(Message("DescribedLater", b"undecided"))
    finally:
        producer.shutdown()

    def scheduled() -> dict[str, Any]:
        body = viewer.get(API + "schedule/").json()
        (broker,) = body["brokers"]
        return body if broker.get("pendingHalfMessages") and broker["delayLevels"][17]["waiting"] else {}

    schedule = wait_for(scheduled, 10, "the delayed and half messages")
    assert set(schedule) <= fields(schema, "ScheduleOut")
    (broker,) = schedule["brokers"]
    assert set(broker) <= fields(schema, "ScheduleBrokerOut")
    assert all(set(level) <= fields(schema, "DelayLevelOut") for level in broker["delayLevels"])
    assert broker["halfMessages"] and all(
        set(half) <= fields(schema, "HalfMessageOut") for half in broker["halfMessages"]
    )

    account = {"accessKey": "described-app", "secretKey": "s3cret-key", "topicPerms": ["Orders=PUB"]}
    saved = admin.post(API + "acl/", account, content_type="application/json")
    assert saved.status_code == 201 and set(saved.json()) <= fields(schema, "AclAccountSavedOut")
    white = {"addresses": ["127.0.0.1", "10.0.*.*"]}
    replaced = admin.put(API + "acl/whitelist/", white, content_type="application/json")
    assert replaced.status_code == 200 and set(replaced.json()) <= fields(schema, "WhiteListOut")
    for client in (viewer, admin):
        acl = client.get(API + "acl/").json()
        assert set(acl) <= fields(schema, "AclOut") and acl["brokers"]
        for row in acl["brokers"]:
            assert set(row) <= fields(schema, "AclBrokerOut") and row["plainAccessConfigs"]
            assert all(set(a) <= fields(schema, "AclAccountOut") for a in row["plainAccessConfigs"])

    # Last: once a cluster is configured, the one of the settings ("default") is not managed.
    made = admin.post(
        "/api/clusters/",
        {"name": "described", "namesrv_addr": "10.0.0.1:9876"},
        content_type="application/json",
    )
    assert made.status_code == 201 and set(made.json()) <= fields(schema, "ClusterOut")
    assert set(viewer.get("/api/clusters/described/").json()) <= fields(schema, "ClusterOut")
    changed = admin.put(
        "/api/clusters/described/",
        {"name": "described", "namesrv_addr": "10.0.0.1:9876", "description": "for the schema"},
        content_type="application/json",
    )
    assert changed.status_code == 200 and set(changed.json()) <= fields(schema, "ClusterOut")
    for client, name in ((viewer, "nope"), (personas["outsider"], "described")):
        missing = client.get(f"/api/clusters/{name}/")
        assert missing.status_code == 404 and set(missing.json()) <= fields(schema, "ClusterNotFoundOut")

    audit = viewer.get("/api/audit/").json()
    assert set(audit) <= fields(schema, "AuditPageOut") and audit["results"]
    assert {"cluster.create", "acl.account.save"} <= {row["action"] for row in audit["results"]}
    assert all(set(row) <= fields(schema, "AuditEntryOut") for row in audit["results"])


def test_real_report_answers_have_only_described_fields(
    on_servers: Servers,
    console_redis: Any,
    reports_dir: Path,
    personas: dict[str, Client],
    schema: dict[str, Any],
) -> None:
    """Runs written as the Spark job leaves them (``test_reports``' helpers), and one asked
    for over the API (queued, its tables not there yet)."""

    viewer = personas["viewer"]
    a, b = traffic_run(reports_dir, 1), traffic_run(reports_dir, 3)
    la, lb = lag_run(reports_dir, 30), lag_run(reports_dir, 90)
    reports = API + "reports/"
    listed = viewer.get(reports).json()
    assert set(listed) <= fields(schema, "ReportRunPageOut") and len(listed["results"]) == 4
    for run in listed["results"]:
        assert set(run) <= fields(schema, "ReportRunOut")
        assert set(run["summary"]) <= fields(schema, "ReportSummaryOut")
    traffic = viewer.get(f"{reports}{a.id}/").json()
    assert set(traffic) <= fields(schema, "ReportRunDetailOut") and traffic["tables"]
    assert all(set(links) <= fields(schema, "ReportTableLinksOut") for links in traffic["tables"].values())
    summary = traffic["summary"]
    assert set(summary["peakMinute"]) <= fields(schema, "PeakOut")
    assert all(set(peak) <= fields(schema, "PeakOut") for peak in summary["peakByTopic"].values())
    lag = viewer.get(f"{reports}{la.id}/").json()["summary"]
    for key, component in (
        ("growing", "GrowingLagOut"),
        ("stalled", "StalledLagOut"),
        ("worst", "WorstLagOut"),
    ):
        assert all(set(row) <= fields(schema, component) for row in lag[key]), key
    for asked in ("?limit=2", "?sort=messages&order=desc"):
        table = viewer.get(f"{reports}{a.id}/tables/topic_minute/{asked}").json()
        assert set(table) <= fields(schema, "ReportTableOut") and table["rows"], asked
    sort = viewer.get(f"{reports}{a.id}/tables/topic_minute/?sort=messages").json()["sort"]
    assert set(sort) <= fields(schema, "TableSortOut")

    for first, second in ((a, b), (la, lb)):
        compared = viewer.get(f"{reports}compare/?a={first.id}&b={second.id}").json()
        assert set(compared) <= fields(schema, "ReportCompareOut"), first.kind
        assert set(compared["a"]) <= fields(schema, "ReportRunOut")
        assert all(set(f) <= fields(schema, "FigureDeltaOut") for f in compared["figures"])
        assert all(set(t) <= fields(schema, "TopicDeltaOut") for t in compared.get("topics", []))
        assert compared["groups"] and all(
            set(g) <= fields(schema, "GroupDeltaOut") for g in compared["groups"]
        )
        for group in compared["groups"]:
            for key in set(group) - {"group", "topic"}:
                component = "FlagPairOut" if key in ("growing", "stalled") else "DeltaOut"
                assert set(group[key]) <= fields(schema, component), key
    mixed = viewer.get(f"{reports}compare/?a={a.id}&b={la.id}")
    assert mixed.status_code == 400 and set(mixed.json()) <= fields(schema, "ReportErrorOut")

    queued = personas["operator"].post(
        reports, {"kind": "traffic", "lastMinutes": 30}, content_type="application/json"
    )
    assert queued.status_code == 202 and set(queued.json()) <= fields(schema, "ReportRunQueuedOut")
    not_yet = viewer.get(f"{reports}{queued.json()['id']}/tables/topic_minute/")
    assert not_yet.status_code == 409 and set(not_yet.json()) <= fields(schema, "ReportErrorOut")
    gone = viewer.get(f"{reports}{uuid.uuid4()}/")
    assert gone.status_code == 404 and set(gone.json()) <= fields(schema, "ReportErrorOut")


def _queued(namesrv_addr: str) -> int:
    stats = admin_call(namesrv_addr, lambda admin: admin.topic_stats("DescribedExpiry"))
    return sum(q.max_offset for q in stats.queues)


async def _group_behind(admin: AdminClient, group: str, topic: str) -> None:
    await admin.create_or_update_subscription_group(SubscriptionGroupConfig(group), cluster="ConsoleCluster")
    await admin.reset_offset_by_time(group, topic, 0)


def test_real_maintenance_traffic_and_task_answers_have_only_described_fields(
    tmp_path: Path, console_redis: Any, settings: Any, personas: dict[str, Client], schema: dict[str, Any]
) -> None:
    """A broker of its own with 64 KiB segments that expiry may delete at once, so the
    maintenance answer lists a deletion, and whose offset history gives the day's traffic."""

    console_redis.flushdb()
    settings.QUIVER = {**settings.QUIVER, "ALERT_WEBHOOK_URL": "", "HISTORY_DIR": tmp_path / "history"}
    conf = {
        "mappedFileSizeCommitLog": 64 * 1024,
        "fileReservedTime": 0,
        "deleteWhen": ";".join(f"{h:02d}" for h in range(24)),
        "standaloneMaintenance": "false",
    }
    admin, viewer = personas["admin"], personas["viewer"]
    (tmp_path / "servers").mkdir()
    with run_servers(tmp_path / "servers", **conf) as servers:
        settings.QUIVER = {**settings.QUIVER, "NAMESRV_ADDR": servers.namesrv_addr}
        producer = Producer("described-expiry", servers.namesrv_addr, compress_over=1 << 30).start()
        try:
            for i in range(48):  # 4 KiB each: about 3 segments
                producer.send(Message("DescribedExpiry", os.urandom(4096), keys=f"k{i}"))
        finally:
            producer.shutdown()
        wait_for(lambda: _queued(servers.namesrv_addr) == 48, 30, "the messages in their queues")
        admin_call(servers.namesrv_addr, lambda a: _group_behind(a, "described-behind", "DescribedExpiry"))
        for job in (OFFSET_PERSISTENCE, FILE_EXPIRY):
            for target in maintenance.discover(job, masters_only=job == OFFSET_PERSISTENCE):
                assert maintenance.run_on_broker(job, target).status == "ok"

        overview = viewer.get("/api/maintenance/jobs/").json()
        assert set(overview) <= fields(schema, "JobOverviewOut")
        assert all(set(run) <= fields(schema, "MaintenanceRunOut") for run in overview["recent"])
        assert overview["deletions"] and all(
            set(row) <= fields(schema, "DeletionOut") for row in overview["deletions"]
        )
        assert any(row["unconsumed"] for row in overview["deletions"])
        for row in overview["deletions"]:
            assert all(set(u) <= fields(schema, "UnconsumedOut") for u in row["unconsumed"])
        for job in overview["jobs"]:
            assert set(job) <= fields(schema, "JobStatusOut")
            assert all(set(run) <= fields(schema, "JobBrokerRunOut") for run in job["brokers"])
        assert overview["brokers"]
        for broker in overview["brokers"]:
            assert set(broker) <= fields(schema, "BrokerDriversOut") and broker["reachable"]
            for state in broker["jobs"].values():
                assert set(state) <= fields(schema, "BrokerJobStateOut")
                assert state["lastRun"] is None or set(state["lastRun"]) <= fields(schema, "BrokerJobRunOut")
        assert any(state["lastRun"] for broker in overview["brokers"] for state in broker["jobs"].values())

        def counted() -> dict[str, Any] | None:
            """The day's traffic once a snapshot has the topic's puts (the broker counts a
            put when the message is dispatched to its queue, a moment after the send)."""
            for target in maintenance.discover(OFFSET_PERSISTENCE):
                maintenance.run_on_broker(OFFSET_PERSISTENCE, target)
            body = viewer.get("/api/clusters/default/traffic/?by=topic").json()
            return body if "DescribedExpiry" in body["series"] else None

        traffic = wait_for(counted, 10, "the topic's puts in the offset history")
        assert set(traffic) <= fields(schema, "TrafficOut")
        assert all(set(row) <= fields(schema, "TrafficTopOut") for row in traffic["top"])

    queued = admin.post("/api/maintenance/jobs/file_expiry/run/")
    assert queued.status_code == 202 and set(queued.json()) <= fields(schema, "JobQueuedOut")
    for refused, status in (
        (admin.post("/api/maintenance/jobs/nope/run/"), 404),
        (viewer.get("/api/maintenance/jobs/?recent=x"), 400),
    ):
        assert refused.status_code == status and set(refused.json()) <= fields(schema, "JobErrorOut")

    # A long task: a resend queued (no worker here: it stays pending).
    started = admin.post(
        "/api/dlq/resend/",
        {"group": "described-group", "msgIds": ["0" * 32]},
        content_type="application/json",
    )
    assert started.status_code == 202, started.content
    tasks = admin.get("/api/tasks/").json()
    assert set(tasks) <= fields(schema, "TaskListOut") and tasks["tasks"]
    assert all(set(task) <= fields(schema, "TaskOut") for task in tasks["tasks"])
    task = admin.get(f"/api/tasks/{started.json()['taskId']}/").json()
    assert set(task) <= fields(schema, "TaskOut")
    for refused, status in (
        (admin.get(f"/api/tasks/{uuid.uuid4()}/"), 404),
        (admin.get("/api/tasks/?limit=x"), 400),
    ):
        assert refused.status_code == status and set(refused.json()) <= fields(schema, "TaskErrorOut")
