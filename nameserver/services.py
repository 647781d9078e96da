"""What the console shows of a cluster's topology: brokers with their figures, and health checks.

Every broker is asked once per view (its runtime table), all at the same time; a broker
that does not answer gets a row whose figures are None (shown as unknown, never as 0)
and an ``error`` naming it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from broker_core.topics import is_system_topic


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


async def broker_rows(admin: AdminClient) -> list[dict[str, Any]]:
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
    rows = []
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


async def health_checks(admin: AdminClient) -> list[dict[str, Any]]:
    """RocketMQ Dashboard's checks and a few of our own, each ``{check, ok, detail}``."""
    rows = await broker_rows(admin)
    checks = []
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


async def schedule_rows(admin: AdminClient) -> dict[str, Any]:
    """Per master: the delay levels' backlog with next due times, and pending half messages
    with their age (a broker that does not answer is named, its figures unknown)."""
    info = await admin.cluster_info()
    masters = info.master_addrs()
    answers = await asyncio.gather(
        *(admin.schedule_status(a) for a in masters.values()), return_exceptions=True
    )
    brokers = []
    for (name, addr), answer in zip(masters.items(), answers, strict=True):
        if isinstance(answer, BaseException):
            brokers.append({"brokerName": name, "addr": addr, "error": f"{addr} did not answer: {answer}"})
        else:
            brokers.append({"brokerName": name, "addr": addr, "error": None, **answer})
    return {"brokers": brokers}
