"""REST endpoints of the reports, under ``/api/clusters/<cluster>/reports/``.

Viewers list runs, read their tables and download them; operators run a report on demand
(audited as ``report.run``).  Tables are read from the run's Parquet files in this process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from console.core.apiviews import ClusterAPIView, documented, query_int
from console.reports import compare, services, tables
from console.reports import serializers as out
from console.reports.models import ReportRun
from console.reports.serializers import RunCreate

PAGE_SIZE_MAX = 200

# A table as a file: its body, or why there is none (no such run or table, or not yet).
DOWNLOAD_ERRORS: dict[object, object] = {404: out.ReportErrorOut, 409: out.ReportErrorOut}


def bad_request(detail: str) -> Response:
    return Response({"error": "bad_request", "detail": detail}, status=status.HTTP_400_BAD_REQUEST)


def not_found(detail: str) -> Response:
    return Response({"error": "not_found", "detail": detail}, status=status.HTTP_404_NOT_FOUND)


class ReportRunsView(ClusterAPIView):
    """GET: the cluster's runs, newest first (``kind``, ``status``, ``page``, ``page_size``).
    POST ``{kind, since, until | lastMinutes, topics?}``: run a report now (operators); 202."""

    @documented(
        "List report runs",
        operation_id="clusters_reports_list",
        responses={200: out.ReportRunPageOut, 400: out.ReportErrorOut},
    )
    def get(self, request: Request, cluster: str) -> Response:
        _ = self.cluster  # 404 for an unknown cluster
        try:
            runs = services.runs_of(
                cluster, request.query_params.get("kind", ""), request.query_params.get("status", "")
            )
        except services.BadRequest as exc:
            return bad_request(str(exc))
        page = max(1, query_int(request, "page", 1))
        size = max(1, min(PAGE_SIZE_MAX, query_int(request, "page_size", 50)))
        count = runs.count()
        shown = runs[(page - 1) * size : page * size]
        return Response(
            {"count": count, "page": page, "pageSize": size, "results": [r.to_json() for r in shown]}
        )

    @documented(
        "Run a report now",
        request=RunCreate,
        responses={202: out.ReportRunQueuedOut, 400: out.ReportErrorOut, 503: out.ReportErrorOut},
    )
    def post(self, request: Request, cluster: str) -> Response:
        form = RunCreate(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            wanted = services.check_request(data["kind"], data["since"], data["until"], data["topics"])
        except services.BadRequest as exc:
            return bad_request(str(exc))
        if wanted.topics:
            missing = services.missing_topics(wanted.topics, self.admin(lambda admin: admin.topic_list()))
            if missing:
                return bad_request(f"no topic {', '.join(missing)} on cluster {self.cluster.name}")
        run, problem = services.do_run_report(request, self.cluster, wanted)
        if problem:
            return Response(
                {"error": "queue_unavailable", "detail": problem}, status=status.HTTP_503_SERVICE_UNAVAILABLE
            )
        url = reverse("reports:api-detail", args=[self.cluster.name, run.id], request=request)
        return Response({**run.to_json(), "url": url}, status=status.HTTP_202_ACCEPTED)


class RunMixin(ClusterAPIView):
    """Finds the run of the URL (404 when the cluster has no such run)."""

    def run(self, run_id: str) -> ReportRun | None:
        _ = self.cluster
        return services.run_of(self.cluster.name, run_id)


class ReportRunDetail(RunMixin):
    """GET: one run: status, progress, summary, and its tables (URLs to read and download)."""

    @documented("One report run", responses={200: out.ReportRunDetailOut, 404: out.ReportErrorOut})
    def get(self, request: Request, cluster: str, run_id: str) -> Response:
        run = self.run(run_id)
        if run is None:
            return not_found(f"no report run {run_id} on {cluster}")
        body: dict[str, Any] = run.to_json()
        if run.status == ReportRun.SUCCEEDED:
            body["tables"] = {
                name: {
                    "rows": reverse("reports:api-table", args=[cluster, run.id, name], request=request),
                    "csv": reverse("reports:api-table-csv", args=[cluster, run.id, name], request=request),
                    "parquet": reverse(
                        "reports:api-table-parquet", args=[cluster, run.id, name], request=request
                    ),
                }
                for name in tables.table_names(run.kind)
            }
        return Response(body)


class TableView(RunMixin):
    """Shared by the table endpoints: the succeeded run's table or a 404/409 answer."""

    def table_or_answer(self, run_id: str, table: str) -> tuple[ReportRun | None, Response | None]:
        run = self.run(run_id)
        if run is None:
            return None, not_found(f"no report run {run_id} on {self.cluster.name}")
        if run.status != ReportRun.SUCCEEDED:
            detail = f"the run is {run.status}: its tables are there once it has succeeded"
            return None, Response({"error": "not_ready", "detail": detail}, status=status.HTTP_409_CONFLICT)
        if table not in tables.table_names(run.kind):
            return None, not_found(f"a {run.kind} report has no table {table!r}")
        return run, None

    def download(self, run_id: str, table: str, build: Callable[[ReportRun], tuple[bytes, str, str]]) -> Any:
        """The table as a file: ``build(run)`` gives (body, file extension, content type)."""
        run, answer = self.table_or_answer(run_id, table)
        if run is None:
            return answer
        try:
            body, ext, content_type = build(run)
        except tables.TableMissing as exc:
            return not_found(str(exc))
        response = HttpResponse(body, content_type=content_type)
        response["Content-Disposition"] = f'attachment; filename="{run.kind}-{run.id}-{table}.{ext}"'
        return response


class ReportTable(TableView):
    """GET ``?limit=&offset=&sort=&order=``: rows of one table as JSON (times as epoch ms),
    in file order or sorted by a column over the whole table (``order``: asc or desc)."""

    @documented(
        "Rows of a report table",
        responses={200: out.ReportTableOut, 400: out.ReportErrorOut, **DOWNLOAD_ERRORS},
    )
    def get(self, request: Request, cluster: str, run_id: str, table: str) -> Response:
        run, answer = self.table_or_answer(run_id, table)
        if run is None:
            return answer
        limit, offset = query_int(request, "limit", 100), query_int(request, "offset", 0)
        if limit < 1 or offset < 0:
            return bad_request("limit is at least 1 and offset not negative")
        sort, order = request.query_params.get("sort") or None, request.query_params.get("order", "asc")
        if order not in ("asc", "desc"):
            return bad_request("order is asc or desc")
        try:
            return Response(
                tables.page(run.output, run.kind, table, limit, offset, sort, descending=order == "desc")
            )
        except tables.TableMissing as exc:
            return not_found(str(exc))
        except ValueError as exc:  # no such column to sort by
            return bad_request(str(exc))


class ReportTableCsv(TableView):
    """GET: one table as a CSV file."""

    @documented(
        "Download a report table as CSV",
        responses={(200, "text/csv"): OpenApiTypes.BINARY, **DOWNLOAD_ERRORS},
    )
    def get(self, request: Request, cluster: str, run_id: str, table: str) -> Any:
        return self.download(
            run_id, table, lambda run: (tables.as_csv(run.output, run.kind, table), "csv", "text/csv")
        )


class ReportTableParquet(TableView):
    """GET: one table's Parquet file (a zip of its part files when there are several)."""

    @documented(
        "Download a report table as Parquet",
        responses={
            (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY,
            (200, "application/zip"): OpenApiTypes.BINARY,
            **DOWNLOAD_ERRORS,
        },
    )
    def get(self, request: Request, cluster: str, run_id: str, table: str) -> Any:
        def build(run: ReportRun) -> tuple[bytes, str, str]:
            body, ext = tables.as_parquet(run.output, run.kind, table)
            return body, ext, "application/vnd.apache.parquet" if ext == "parquet" else "application/zip"

        return self.download(run_id, table, build)


class ReportCompare(ClusterAPIView):
    """GET ``?a=<run id>&b=<run id>``: run b against run a (same kind, both succeeded)."""

    @documented(
        "Compare two report runs",
        responses={200: out.ReportCompareOut, 400: out.ReportErrorOut, 404: out.ReportErrorOut},
    )
    def get(self, request: Request, cluster: str) -> Response:
        _ = self.cluster
        ids = request.query_params.get("a", ""), request.query_params.get("b", "")
        if not all(ids):
            return bad_request("give two runs: ?a=<run id>&b=<run id>")
        runs = [services.run_of(cluster, i) for i in ids]
        for run_id, run in zip(ids, runs, strict=True):
            if run is None:
                return not_found(f"no report run {run_id} on {cluster}")
        try:
            return Response(compare.compare(runs[0], runs[1]))  # type: ignore[arg-type]
        except compare.NotComparable as exc:
            return bad_request(str(exc))
