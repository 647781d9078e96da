"""The cluster dashboard page: brokers, broker sets and replication, health, live TPS, top
groups by lag, recent jobs."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET
from redis.exceptions import RedisError

from broker_core.errors import AdminError
from console.clusters import replication, services, traffic
from console.core.actions import failure_words
from console.core.pages import ask, cluster_for, context
from console.groups import services as groups
from console.maintenance.services import job_overview
from console.quiver import platform_settings
from nameserver.topology import broker_rows


@login_required
@require_GET
def clusters(request: HttpRequest) -> HttpResponse:
    """The list of clusters is the home page's overview (each with its figures): go there."""
    return redirect("core:home")


@login_required
@require_GET
def dashboard(request: HttpRequest, cluster: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    brokers, broker_error = ask(ref, broker_rows)
    remembered = replication.remembered_slaves(ref.name)
    limits = replication.LagLimits.from_settings()
    sets, sets_error = ask(ref, lambda admin: replication.broker_sets(admin, remembered, limits))
    checks, health_error = ask(ref, services.health_checks)
    found, group_error = ask(ref, groups.group_rows)
    top = []
    if found is not None:
        rows, _unreadable = found
        top = sorted((r for r in rows if r["lag"]), key=lambda r: -r["lag"])[:10]
    schedule, schedule_error = ask(ref, services.schedule_rows)
    today = dt.datetime.now(dt.UTC).date()
    traffic_day = traffic.puts_day(platform_settings()["HISTORY_DIR"], today, cluster=ref.name, by="topic")
    try:
        recent, jobs_error = job_overview(limit=10)["recent"], ""
    except RedisError as exc:
        recent, jobs_error = [], f"maintenance runs unknown: the platform's Redis did not answer ({exc})"
    return render(
        request,
        "clusters/dashboard.html",
        context(
            request,
            ref,
            brokers=brokers or [],
            broker_sets=[_shown(s) for s in sets or []],
            max_behind_bytes=limits.max_bytes,
            max_behind_seconds=limits.max_ms // 1000,
            checks=checks or [],
            top_groups=top,
            top_topics=[{"topic": t, "messages": n} for t, n in traffic_day.top()],
            traffic_as_of=traffic_day.as_of_ms,
            persist_seconds=platform_settings()["OFFSET_PERSIST_SECONDS"],
            schedule=(schedule or {}).get("brokers", []),
            recent_runs=recent,
            errors=[
                e
                for e in (broker_error, sets_error, health_error, group_error, schedule_error, jobs_error)
                if e
            ],
        ),
    )


def _shown(broker_set: replication.BrokerSet) -> dict[str, Any]:
    """A broker set as the dashboard shows it: whether it needs attention, and per slave
    its lag in seconds and whether it is flagged (link down, not answering, or lagging)."""
    return {
        **broker_set,
        "fine": broker_set["state"] in replication.FINE_STATES,
        "slaves": [
            {
                **slave,
                "behindSeconds": None if slave["behindMs"] is None else slave["behindMs"] / 1000,
                "flagged": not slave["connected"] or bool(slave["error"]) or bool(slave["lagging"]),
            }
            for slave in broker_set["slaves"]
        ],
    }


@login_required
def broker_config(request: HttpRequest, cluster: str, addr: str) -> HttpResponse:
    """A broker's running settings; admins change one (until the broker restarts), audited."""
    ref = cluster_for(request, cluster, "admin" if request.method == "POST" else "view")
    if request.method == "POST":
        key, value = request.POST.get("key", "").strip(), request.POST.get("value", "").strip()
        if key:
            try:
                services.update_broker_config(request, ref, addr, {key: value})
                flash.success(request, f"{key} is now {value!r} (until the broker restarts)")
            except (AdminError, TimeoutError) as exc:
                flash.error(request, f"not changed: {failure_words(exc)}")
        return redirect("clusters:broker-config", cluster=cluster, addr=addr)
    config, error = ask(ref, lambda admin: admin.broker_config(addr))
    return render(
        request,
        "clusters/broker_config.html",
        context(request, ref, addr=addr, config=config or {}, errors=[error] if error else []),
    )
