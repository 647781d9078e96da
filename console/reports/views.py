"""Report pages: the run history with a "run now" form, one run (live progress, summary,
charts, tables, downloads, a permalink keeping the chosen tab and table), and a comparison
of two runs.  Chart data comes from charts.py; the page's script draws it with ECharts."""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from console.core.pages import ask, cluster_for, context
from console.reports import charts, compare, display, services, tables
from console.reports.models import ReportRun
from nameserver.clusters import ClusterRef

TABS = ("summary", "charts", "tables")
ROWS_PER_PAGE = 100


@login_required
@require_GET
def report_list(request: HttpRequest, cluster: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    kind, status = request.GET.get("kind", ""), request.GET.get("status", "")
    errors = []
    try:
        runs = services.runs_of(ref.name, kind, status)
    except services.BadRequest as exc:
        runs, errors = services.runs_of(ref.name), [str(exc)]
    page = Paginator(runs, 25).get_page(request.GET.get("page"))
    succeeded = services.runs_of(ref.name, status=ReportRun.SUCCEEDED)[:50]
    return render(
        request,
        "reports/list.html",
        context(
            request,
            ref,
            page=page,
            kind=kind,
            status=status,
            kinds=services.KINDS,
            statuses=[s for s, _ in ReportRun.STATUSES],
            periods=services.PERIODS,
            succeeded=succeeded,
            errors=errors,
        ),
    )


def _period(request: HttpRequest) -> tuple[int, int]:
    """(since, until) from the form: a preset period, or a from/to pair (UTC)."""
    preset = request.POST.get("period", "1h")
    if preset != "custom":
        if preset not in services.PERIODS:
            raise services.BadRequest(f"unknown period {preset!r}")
        until = services.now_ms()
        return until - services.PERIODS[preset] * 60_000, until
    try:
        start, end = (
            dt.datetime.fromisoformat(request.POST.get(name, "")).replace(tzinfo=dt.UTC)
            for name in ("since", "until")
        )
    except ValueError:
        raise services.BadRequest("give the period's start and end (YYYY-MM-DDTHH:MM, UTC)") from None
    return int(start.timestamp() * 1000), int(end.timestamp() * 1000)


@login_required
@require_POST
def run_now(request: HttpRequest, cluster: str) -> HttpResponse:
    """The list page's form (operators): queue a run and open its page."""
    ref = cluster_for(request, cluster, "operate")
    topics = [t for t in request.POST.get("topics", "").replace(" ", ",").split(",") if t]
    try:
        since, until = _period(request)
        wanted = services.check_request(request.POST.get("kind", ""), since, until, topics)
    except services.BadRequest as exc:
        flash.error(request, f"not run: {exc}")
        return redirect("reports:list", cluster=cluster)
    if wanted.topics:
        known, error = ask(ref, lambda admin: admin.topic_list())
        missing = services.missing_topics(wanted.topics, known or []) if known is not None else []
        if error or missing:
            flash.error(request, f"not run: {error or 'no topic ' + ', '.join(missing)}")
            return redirect("reports:list", cluster=cluster)
    run, problem = services.do_run_report(request, ref, wanted)
    if problem:
        flash.error(request, problem)
    return redirect("reports:run", cluster=cluster, run_id=run.id)


def _run_or_404(request: HttpRequest, cluster: str, run_id: str) -> tuple[ClusterRef, ReportRun]:
    """The cluster (access checked) and its run ``run_id``; 404 when there is no such run."""
    ref = cluster_for(request, cluster)
    run = services.run_of(ref.name, run_id)
    if run is None:
        raise Http404(f"no report run {run_id} on {ref.name}")
    return ref, run


@login_required
@require_GET
def report_run(request: HttpRequest, cluster: str, run_id: str) -> HttpResponse:
    ref, run = _run_or_404(request, cluster, run_id)
    tab = request.GET.get("tab") if request.GET.get("tab") in TABS else "summary"
    names = tables.table_names(run.kind)
    table = request.GET.get("table") if request.GET.get("table") in names else names[0]
    try:
        offset = max(0, int(request.GET.get("offset", 0)))
    except ValueError:
        offset = 0
    chart_data, rows, errors = None, None, []
    links: dict[str, str] = {}
    if run.status == ReportRun.SUCCEEDED:
        try:
            chart_data = charts.for_run(run)
            rows, links = _rows(run, table, offset, request.GET.get("sort"), request.GET.get("order"))
        except (tables.TableMissing, OSError) as exc:
            errors.append(f"the run's tables cannot be read: {exc}")
    others = services.runs_of(ref.name, run.kind, ReportRun.SUCCEEDED).exclude(id=run.id)[:20]
    return render(
        request,
        "reports/run.html",
        context(
            request,
            ref,
            run=run,
            tab=tab,
            tabs=TABS,
            table=table,
            table_names=names,
            rows=rows,
            charts=chart_data,
            peak_topics=display.peak_topics(run.summary) if run.kind == ReportRun.TRAFFIC else [],
            others=others,
            errors=errors,
            has_log=services.run_log(str(run.id)).is_file(),
            **links,
        ),
    )


@login_required
@require_GET
def report_log(request: HttpRequest, cluster: str, run_id: str) -> HttpResponse:
    """The run's log as plain text: the report process's output, a failure's whole traceback."""
    _ref, run = _run_or_404(request, cluster, run_id)
    try:
        text = services.run_log(str(run.id)).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise Http404(f"report run {run_id} has no log (it has not started, or ran elsewhere)") from None
    return HttpResponse(text, content_type="text/plain; charset=utf-8")


def _rows(
    run: ReportRun, table: str, offset: int, sort: str | None, order: str | None
) -> tuple[dict[str, object], dict[str, str]]:
    """The page of ``table`` the tables tab shows (sorted as asked, else busiest first) and
    the links to its previous and next pages (keeping the sort)."""
    column, descending = display.parse_sort(tables.table_columns(run.kind, table), sort, order)
    try:
        answer = tables.page(run.output, run.kind, table, ROWS_PER_PAGE, offset, column, descending)
    except ValueError:  # a table written without that column: its file order
        answer = tables.page(run.output, run.kind, table, ROWS_PER_PAGE, offset)
    base = {"tab": "tables", "table": table}
    view = display.table_view(answer, base)
    sorted_by = answer["sort"] or {}
    if sorted_by:
        base = {**base, "sort": sorted_by["column"], "order": "desc" if sorted_by["descending"] else "asc"}
    links: dict[str, str] = {}
    if offset + ROWS_PER_PAGE < answer["count"]:
        links["next_href"] = "?" + urlencode({**base, "offset": offset + ROWS_PER_PAGE})
    if offset:
        links["previous_href"] = "?" + urlencode({**base, "offset": max(0, offset - ROWS_PER_PAGE)})
    return view, links


@login_required
@require_GET
def report_compare(request: HttpRequest, cluster: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    a_id, b_id = request.GET.get("a", ""), request.GET.get("b", "")
    runs = services.runs_of(ref.name, status=ReportRun.SUCCEEDED)[:100]
    result, errors, status = None, [], 200
    if a_id and b_id:
        a, b = services.run_of(ref.name, a_id), services.run_of(ref.name, b_id)
        if a is None or b is None:
            errors, status = [f"no report run {a_id if a is None else b_id} on {ref.name}"], 404
        else:
            try:
                result = compare.compare(a, b)
            except compare.NotComparable as exc:
                errors, status = [str(exc)], 400
            except (tables.TableMissing, OSError) as exc:
                errors = [f"the runs' tables cannot be read: {exc}"]
    return render(
        request,
        "reports/compare.html",
        context(request, ref, runs=runs, a_id=a_id, b_id=b_id, result=result, errors=errors),
        status=status,
    )
