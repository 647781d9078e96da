"""The DLQ pages: the cluster's overview of dead letters, and a group's dead letters page by
page, where a person selects some (or all) and resends them (a long task whose progress and
per-message outcome the task page shows)."""

from __future__ import annotations

from collections.abc import Iterable

import orjson
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from redis.exceptions import RedisError

from broker_core.errors import AdminError
from console.core.api_errors import failure_words
from console.core.pages import ask, cluster_for, context
from console.dlq import resends, services
from nameserver.clusters import ClusterRef

NOTHING_SELECTED = (
    "Select at least one message to resend: tick its box, or choose “Select all”, then press Resend."
)


def kind_of(raw: str | None) -> str:
    return raw if raw in ("dlq", "retry") else "dlq"


def page_number(raw: str | None) -> int:
    return int(raw) if raw and raw.isdigit() and int(raw) > 0 else 1


@login_required
@require_GET
def overview(request: HttpRequest, cluster: str) -> HttpResponse:
    """Every group with dead letters, how many, since when; each links to its DLQ page."""
    ref = cluster_for(request, cluster)
    found, error = ask(ref, services.overview)
    return render(
        request, "dlq/overview.html", context(request, ref, found=found, errors=[error] if error else [])
    )


def show(
    request: HttpRequest,
    ref: ClusterRef,
    group: str,
    kind: str,
    number: int,
    tag: str,
    key: str,
    errors: Iterable[str] = (),
    status: int = 200,
    selected: Iterable[str] = (),
) -> HttpResponse:
    """The group's DLQ page ``number``: the table, the total, paging and the resend controls,
    with ``errors`` above and the ``selected`` messages still ticked (a refused resend keeps
    the page the person was on)."""
    page, error = ask(ref, lambda admin: services.page_of(admin, group, kind, number, tag, key))
    extra = {
        "group": group,
        "kind": kind,
        "page": page,
        "tag": tag,
        "key": key,
        "spans": orjson.dumps(page["spans"]).decode() if page else "",
        "selected": set(selected),
        "nothing_selected": NOTHING_SELECTED,
        "errors": [*errors, *([error] if error else [])],
        # The menu marks "Dead letters" (not "Groups", whose URL this page is under).
        "nav_current": reverse("dlq:overview", args=[ref.name]),
    }
    return render(request, "dlq/group.html", context(request, ref, **extra), status=status)


@login_required
@require_GET
def group_dlq(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    kind, number = kind_of(request.GET.get("kind")), page_number(request.GET.get("page"))
    return show(request, ref, group, kind, number, request.GET.get("tag", ""), request.GET.get("key", ""))


@login_required
@require_POST
def resend(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    """Queue the resend of the ticked messages, or with ``all`` of every message the page
    counted; a refusal shows the same page again, table and ticks kept."""
    ref = cluster_for(request, cluster, "operate")
    form = request.POST
    kind, number = kind_of(form.get("kind")), page_number(form.get("page"))
    ids = [i for i in form.getlist("msgId") if len(i) == 32]
    target = form.get("targetTopic", "").strip()

    def again(error: str, status: int) -> HttpResponse:
        tag, key = form.get("tag", ""), form.get("key", "")
        return show(request, ref, group, kind, number, tag, key, [error], status, ids)

    spans = None
    if form.get("all") == "1":
        try:
            spans = services.parse_spans(form.get("spans", ""))
        except ValueError as exc:
            return again(f"Nothing was resent: {exc}.", 400)
        if not spans:
            return again("Nothing was resent: there is no stored message to resend.", 400)
        ids = []
    elif not ids:
        return again(NOTHING_SELECTED, 400)
    topic = services.topic_of(group, kind)
    try:
        row = resends.queue_resend(request, ref, group, target, ids=ids, topic=topic, spans=spans)
    except (AdminError, TimeoutError) as exc:
        words = failure_words(exc)
        return again(f"Nothing was resent: the target topic {target} cannot be used ({words}).", 400)
    except (RedisError, OSError) as exc:
        return again(f"Nothing was resent: the task could not be queued ({exc}). Try again shortly.", 503)
    return redirect("core:task", task_id=row.id)
