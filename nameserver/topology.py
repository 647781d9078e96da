"""What the nameservers say a cluster is made of: its broker sets, each broker's role and
figures, and its masters.

Every broker is asked once per read (its runtime table), all at the same time; a broker
that does not answer gets a row whose figures are None (shown as unknown, never as 0)
and an ``error`` naming it.  The console's pages, its home page and its live socket read
the same rows, so they agree.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Literal, TypedDict

from broker_core.client.admin import AdminClient


class BrokerRow(TypedDict):
    """One broker address: who and where it is, and its figures (None when unknown)."""

    cluster: str
    brokerName: str
    brokerId: int
    addr: str
    role: str
    version: str | None
    putTps: float | None
    getTps: float | None
    putToday: int | None
    getToday: int | None
    diskUsedPercent: float | None
    bootTimestamp: int | None
    uptime: str | None
    topicCount: int | None
    lastHeartbeat: int | None
    error: str | None


class ClusterTotals(TypedDict):
    """A cluster's figures summed over the brokers that answered (None when none did)."""

    putTps: float | None
    getTps: float | None
    putToday: float | None
    getToday: float | None
    brokers: int
    unreadable: list[str]


def _float(table: dict[str, str], key: str, index: int = 0) -> float | None:
    try:
        return float(table[key].split()[index])
    except (KeyError, IndexError, ValueError):
        return None


def _int(table: dict[str, str], key: str) -> int | None:
    try:
        return int(table[key])
    except (KeyError, ValueError):
        return None


def _today(table: dict[str, str], now_key: str, morning_key: str) -> int | None:
    now, morning = _int(table, now_key), _int(table, morning_key)
    return None if now is None or morning is None else max(0, now - morning)


async def master_addrs(admin: AdminClient) -> list[str]:
    """The address of every broker set's master, sorted."""
    return sorted((await admin.cluster_info()).master_addrs().values())


async def broker_rows(admin: AdminClient) -> list[BrokerRow]:
    """One row per broker address: cluster, name, id, role, version, TPS in/out, messages
    today, disk use, boot time, last heartbeat (its last registration with the nameserver);
    figures None with ``error`` set when the broker did not answer."""
    info = await admin.cluster_info()
    members = [
        (cluster, name, int(broker_id), addr)
        for cluster, names in sorted(info.clusters.items())
        for name in names
        if name in info.brokers
        for broker_id, addr in sorted(info.brokers[name].addrs.items())
    ]
    answers, heartbeats = await asyncio.gather(
        asyncio.gather(*(admin.broker_runtime_info(addr) for *_, addr in members), return_exceptions=True),
        admin.broker_heartbeats(),
        return_exceptions=False,
    )
    rows: list[BrokerRow] = []
    for (cluster, name, broker_id, addr), table in zip(members, answers, strict=True):
        failed = isinstance(table, BaseException)
        runtime: dict[str, str] = {} if failed else table  # type: ignore[assignment]
        ratio = _float(runtime, "commitLogDiskRatio")
        rows.append(
            {
                "cluster": cluster,
                "brokerName": name,
                "brokerId": broker_id,
                "addr": addr,
                "role": "master" if broker_id == 0 else "slave",
                "version": runtime.get("brokerVersionDesc"),
                "putTps": _float(runtime, "putTps"),
                "getTps": _float(runtime, "getTransferedTps"),
                "putToday": _today(runtime, "msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
                "getToday": _today(runtime, "msgGetTotalTodayNow", "msgGetTotalTodayMorning"),
                "diskUsedPercent": None if ratio is None else round(100 * ratio, 1),
                "bootTimestamp": _int(runtime, "bootTimestamp"),
                "uptime": runtime.get("runtime"),
                "topicCount": _int(runtime, "topicCount"),
                "lastHeartbeat": heartbeats.get(addr),
                "error": f"{addr} did not answer: {table}" if failed else None,
            }
        )
    return rows


def totals(rows: Sequence[BrokerRow]) -> ClusterTotals:
    """Cluster figures from broker rows; a figure is None when no broker could be read."""
    readable = [r for r in rows if not r["error"]]

    def total(key: Literal["putTps", "getTps", "putToday", "getToday"]) -> float | None:
        values = [value for r in readable if (value := r[key]) is not None]
        return round(sum(values), 2) if values else None

    return {
        "putTps": total("putTps"),
        "getTps": total("getTps"),
        "putToday": total("putToday"),
        "getToday": total("getToday"),
        "brokers": len(rows),
        "unreadable": [r["addr"] for r in rows if r["error"]],
    }
