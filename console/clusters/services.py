"""What the console does with a cluster beyond reading its topology: health checks, the delay
schedule, ACL accounts, broker settings and the cluster list.

Reads are async functions of an ``AdminClient`` (pages call them through ``ask``, the API
through ``self.admin``).  Each write action is one synchronous function that acts and writes
its audit row (``console.core.actions``), so the page and the API change a broker the same
way and record it the same way.  Changes to a cluster's brokers need the admin role on it;
the cluster list is the superusers' (the API checks that).
"""

from __future__ import annotations

import asyncio
from typing import Any, NotRequired, TypedDict, cast

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from broker_core.topics import is_system_topic
from console.audit.services import audited
from console.clusters.serializers import ClusterSerializer
from console.core.actions import Actor, require
from console.core.brokers import admin_call, on_every_master
from nameserver.clusters import ClusterRef
from nameserver.models import Cluster
from nameserver.topology import broker_rows, master_addrs


class HealthCheck(TypedDict):
    """One check of the cluster: what it checks, whether it passed, and what failed in words."""

    check: str
    ok: bool
    detail: str


class ScheduleRows(TypedDict):
    """Per master: ``brokerName``, ``addr``, ``error`` (None when it answered) and, when it
    answered, its QUIVER_GET_SCHEDULE_STATUS body as the broker sent it (``timestampMs``,
    ``delayLevels``, ``timers``, ``halfMessages``, ``pendingHalfMessages``)."""

    brokers: list[dict[str, Any]]


class AclAccountData(TypedDict):
    """Validated ``AclAccount`` data: a plain_acl account, RocketMQ's field names."""

    accessKey: str
    secretKey: NotRequired[str]
    whiteRemoteAddress: NotRequired[str]
    admin: NotRequired[bool]
    defaultTopicPerm: NotRequired[str]
    defaultGroupPerm: NotRequired[str]
    topicPerms: NotRequired[list[str]]
    groupPerms: NotRequired[list[str]]


class ClusterInput(TypedDict):
    """Validated ``ClusterSerializer`` data for a new cluster: the model's fields."""

    name: str
    namesrv_addr: str
    description: NotRequired[str]


class ClusterChanges(TypedDict, total=False):
    """Validated ``ClusterSerializer`` data for a listed cluster: the fields to change."""

    name: str
    namesrv_addr: str
    description: str


class ClusterFields(TypedDict):
    """A listed cluster as the API shows it (``ClusterSerializer``); ``created`` is ISO 8601."""

    name: str
    namesrv_addr: str
    description: str
    created: str


async def health_checks(admin: AdminClient) -> list[HealthCheck]:
    """RocketMQ Dashboard's checks and a few of our own, each ``{check, ok, detail}``."""
    rows = await broker_rows(admin)
    checks: list[HealthCheck] = []
    down = [r["addr"] for r in rows if r["error"]]
    checks.append(
        {
            "check": "brokers answer",
            "ok": not down and bool(rows),
            "detail": "no broker registered"
            if not rows
            else (f"not answering: {', '.join(down)}" if down else ""),
        }
    )
    names = {r["brokerName"] for r in rows}
    masterless = sorted(
        n for n in names if not any(r["brokerName"] == n and r["role"] == "master" for r in rows)
    )
    checks.append(
        {"check": "every broker has a master", "ok": not masterless, "detail": ", ".join(masterless)}
    )
    full = [f"{r['addr']} ({r['diskUsedPercent']}%)" for r in rows if (r["diskUsedPercent"] or 0) > 75]
    checks.append({"check": "disk below 75%", "ok": not full, "detail": ", ".join(full)})
    if len(names) > 1:
        single = []
        for topic in await admin.topic_list():
            if is_system_topic(topic):
                continue
            try:
                route = await admin.topic_route(topic)
            except AdminError:
                continue
            if len({q.broker_name for q in route.queue_datas}) == 1:
                single.append(topic)
        checks.append(
            {
                "check": "topics on more than one broker",
                "ok": not single,
                "detail": f"on one broker only: {', '.join(single[:50])}" if single else "",
            }
        )
    return checks


async def schedule_rows(admin: AdminClient) -> ScheduleRows:
    """Per master: the delay levels' backlog with next due times, and pending half messages
    with their age (a broker that does not answer is named, its figures unknown)."""
    info = await admin.cluster_info()
    masters = info.master_addrs()
    answers = await asyncio.gather(
        *(admin.schedule_status(a) for a in masters.values()), return_exceptions=True
    )
    brokers: list[dict[str, Any]] = []
    for (name, addr), answer in zip(masters.items(), answers, strict=True):
        if isinstance(answer, BaseException):
            brokers.append({"brokerName": name, "addr": addr, "error": f"{addr} did not answer: {answer}"})
        else:
            brokers.append({"brokerName": name, "addr": addr, "error": None, **answer})
    return {"brokers": brokers}


async def acl_rows(admin: AdminClient, *, show_secrets: bool) -> list[dict[str, Any]]:
    """Each master's ACL (global white list and accounts); secrets as ``***`` unless
    ``show_secrets``."""
    rows = []
    for addr in await master_addrs(admin):
        config = await admin.acl_config(addr)
        for account in config.get("plainAccessConfigs", []):
            if not show_secrets:
                account["secretKey"] = "***"
        rows.append({"broker": addr, **config})
    return rows


# -- write actions: each acts and writes its audit row -------------------------------------


def update_broker_config(
    actor: Actor, cluster: ClusterRef, addr: str, changes: dict[str, str]
) -> dict[str, str]:
    """Change broker ``addr``'s settings ``changes`` until it restarts (RocketMQ's
    updateBrokerConfig); the audit row holds each key before and after.  Returns the
    broker's settings afterwards.

    Raises:
        AdminError: the broker refused (its words), or could not be reached.
        TimeoutError: the broker did not answer in time.
        PermissionDenied: the actor's role on the cluster is not admin.
    """
    require(actor, cluster, "admin")
    with audited(actor, "broker.config.update", cluster.name, addr) as audit:
        before = admin_call(cluster.namesrv_addr, lambda admin: admin.broker_config(addr))
        audit.before = {key: before.get(key) for key in changes}
        config = admin_call(cluster.namesrv_addr, lambda admin: admin.update_broker_config(addr, changes))
        audit.after = {key: config.get(key) for key in changes}
    return config


def save_acl_account(actor: Actor, cluster: ClusterRef, account: AclAccountData) -> list[str]:
    """Create or update a plain_acl account (RocketMQ's field names; ``admin`` a bool) on
    every master; the audit row holds it without its secret.  Returns the masters' addresses."""
    require(actor, cluster, "admin")
    sent: dict[str, object] = dict(account)  # as the broker takes it: ``admin`` as text
    if "admin" in account:
        sent["admin"] = "true" if account["admin"] else "false"

    async def write(admin: AdminClient) -> list[str]:
        return await on_every_master(admin, lambda addr: admin.update_acl_account(addr, sent))

    with audited(actor, "acl.account.save", cluster.name, account["accessKey"]) as audit:
        audit.after = {k: v for k, v in sent.items() if k != "secretKey"}
        return admin_call(cluster.namesrv_addr, write)


def delete_acl_account(actor: Actor, cluster: ClusterRef, access_key: str) -> list[str]:
    """Remove the account ``access_key`` from every master; returns their addresses."""
    require(actor, cluster, "admin")

    async def remove(admin: AdminClient) -> list[str]:
        return await on_every_master(admin, lambda addr: admin.delete_acl_account(addr, access_key))

    with audited(actor, "acl.account.delete", cluster.name, access_key):
        return admin_call(cluster.namesrv_addr, remove)


def replace_white_list(actor: Actor, cluster: ClusterRef, addresses: list[str]) -> list[str]:
    """Make ``addresses`` the global white list (addresses that need no account) on every
    master; returns their addresses."""
    require(actor, cluster, "admin")

    async def write(admin: AdminClient) -> list[str]:
        return await on_every_master(admin, lambda addr: admin.update_global_white_addrs(addr, addresses))

    with audited(actor, "acl.whitelist.update", cluster.name, ",".join(addresses)) as audit:
        audit.after = {"addresses": addresses}
        return admin_call(cluster.namesrv_addr, write)


def create_cluster(actor: Actor, fields: ClusterInput) -> Cluster:
    """Add a cluster to the list (``fields``: the model's, validated)."""
    with audited(actor, "cluster.create", fields["name"], fields["name"]) as audit:
        cluster = Cluster.objects.create(**fields)
        audit.after = cluster_fields(cluster)
    return cluster


def update_cluster(actor: Actor, cluster: Cluster, fields: ClusterChanges) -> Cluster:
    """Change a listed cluster's ``fields`` (validated)."""
    with audited(actor, "cluster.update", cluster.name, cluster.name) as audit:
        audit.before = cluster_fields(cluster)
        for name, value in fields.items():
            setattr(cluster, name, value)
        cluster.save()
        audit.after = cluster_fields(cluster)
    return cluster


def delete_cluster(actor: Actor, cluster: Cluster) -> None:
    """Remove a cluster from the list (its brokers are not touched)."""
    with audited(actor, "cluster.delete", cluster.name, cluster.name) as audit:
        audit.before = cluster_fields(cluster)
        cluster.delete()


def cluster_fields(cluster: Cluster) -> ClusterFields:
    """A listed cluster as the API shows it (and the audit log records it)."""
    return cast(ClusterFields, dict(ClusterSerializer(cluster).data))
