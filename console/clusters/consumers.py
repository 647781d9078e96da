"""The live figures of a cluster over a websocket: every two seconds one sample of the brokers
(each broker's row of the dashboard's table, and the cluster's totals for its cards and
chart, summed over the brokers that answered; the others are named).

Every figure is sent with its text as the page's own cells show it (``broker_cells``,
``totals_text``: the same template filters), so a cell reads the same whether the page or
the socket wrote it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from django.template.defaultfilters import floatformat
from django.urls import reverse

from console.core.brokers import admin_call
from console.core.sockets import NO_CHANNEL_LAYER, ClusterSocket
from console.maintenance.templatetags.maintenance_extras import epoch_ms
from nameserver.topology import BrokerRow, ClusterTotals, totals
from nameserver.topology import broker_rows as read_broker_rows

INTERVAL_S = 2.0
UNKNOWN = "unknown"


def rate(value: float | None) -> str:
    """Messages per second as the page shows them: one decimal, thousands grouped."""
    return floatformat(value, "1g") or UNKNOWN


def count(value: float | None) -> str:
    """A count as the page shows it: thousands grouped."""
    return floatformat(value, "g") or UNKNOWN


def totals_text(figures: ClusterTotals) -> dict[str, str]:
    """The cards' text of ``totals`` (``nameserver.topology.totals``)."""
    return {
        "putTps": rate(figures["putTps"]),
        "getTps": rate(figures["getTps"]),
        "putToday": count(figures["putToday"]),
        "getToday": count(figures["getToday"]),
    }


def broker_cells(row: BrokerRow) -> dict[str, str]:
    """A broker's cells as templates/clusters/dashboard.html renders them (keep the two alike)."""
    disk = row["diskUsedPercent"]
    return {
        "version": row["version"] or UNKNOWN,
        "putTps": rate(row["putTps"]),
        "getTps": rate(row["getTps"]),
        "putToday": count(row["putToday"]),
        "diskUsedPercent": UNKNOWN if disk is None else f"{floatformat(disk, 1)}%",
        "uptime": row["uptime"] or "",
        "lastHeartbeat": epoch_ms(row["lastHeartbeat"]),
    }


def broker_rows(cluster: str, rows: list[BrokerRow]) -> list[dict[str, Any]]:
    """The dashboard table's rows, in the page's order: who, where, role, failing, cells."""
    return [
        {
            "addr": r["addr"],
            "brokerName": r["brokerName"],
            "role": r["role"],
            "configUrl": reverse("clusters:broker-config", args=[cluster, r["addr"]]),
            "error": r["error"],
            "cells": broker_cells(r),
        }
        for r in rows
    ]


def sample(cluster: str, rows: list[BrokerRow]) -> dict[str, Any]:
    """One push: the time, the totals (numbers and text) and the table's rows."""
    figures = totals(rows)
    return {
        "at": int(time.time() * 1000),
        **figures,
        "text": totals_text(figures),
        "rows": broker_rows(cluster, rows),
    }


class ClusterLive(ClusterSocket):
    """``/ws/clusters/<cluster>/live/``: signed-in users who may view the cluster."""

    channel_layer_alias = NO_CHANNEL_LAYER  # reads the brokers only: Redis plays no part

    async def tick(self) -> None:
        while True:
            try:
                rows = await asyncio.to_thread(admin_call, self.cluster.namesrv_addr, read_broker_rows)
                push = sample(self.cluster.name, rows)
            except Exception as exc:  # the page says why the numbers stopped
                push = {
                    "at": int(time.time() * 1000),
                    "error": f"the brokers' figures could not be read ({exc})",
                    "putTps": None,
                    "getTps": None,
                }
            await self.send_json(push)
            await asyncio.sleep(INTERVAL_S)
