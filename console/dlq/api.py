"""REST endpoints of the DLQ: the cluster's overview of dead letters, browse a group's, export
them, and re-publish them to their original topic as a long task the client then follows."""

from __future__ import annotations

import time
from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from redis.exceptions import RedisError
from rest_framework import status
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from broker_core.topics import dlq_topic
from console.audit.services import audited
from console.core.access import allowed
from console.core.apiviews import ClusterAPIView, documented, query
from console.core.brokers import admin_call
from console.dlq import resends, services
from console.dlq import serializers as out
from console.dlq.serializers import DlqBrowseQuery, DlqExportQuery, GroupResendRequest, ResendRequest
from nameserver.clusters import ClusterRef, find_cluster


def start_resend(
    request: Request, cluster: ClusterRef, group: str, ids: list[str], target: str, every: bool = False
) -> Response:
    """Queue the resend of ``ids`` (or with ``every``, of all the group's stored dead
    letters) to their topic or ``target``, answer 202 with the task."""
    topic, spans = dlq_topic(group), None
    if every:
        stats = admin_call(cluster.namesrv_addr, lambda admin: services.stats_or_none(admin, topic))
        spans = services.spans_of(stats) if stats is not None else []
        if not spans:
            detail = f"{group} has no dead letters to resend ({topic} stores none)"
            return Response({"error": "nothing_to_resend", "detail": detail}, status=status.HTTP_409_CONFLICT)
    try:
        row = resends.queue_resend(request, cluster, group, target, ids=ids, topic=topic, spans=spans)
    except (RedisError, OSError) as exc:
        return Response(
            {"error": "queue_unavailable", "detail": f"the task could not be queued: {exc}"}, status=503
        )
    url = reverse("core:api-task", args=[row.id], request=request)
    count = services.span_count(spans) if spans else len(set(ids))
    return Response({"taskId": str(row.id), "url": url, "messages": count}, status=status.HTTP_202_ACCEPTED)


# What a resend answers: the queued task, or why none was queued.
RESEND_ANSWERS = {202: out.ResendQueuedOut, 409: out.ResendRefusedOut, 503: out.ResendRefusedOut}


class Resend(APIView):
    """POST {group, msgIds | all: true, cluster?, targetTopic?} (staff): queue the resend; 202
    with the task."""

    permission_classes = [IsAdminUser]

    @documented("Resend dead letters (a long task)", request=ResendRequest, responses=RESEND_ANSWERS)
    def post(self, request: Request) -> Response:
        form = ResendRequest(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            cluster = find_cluster(data["cluster"])
        except LookupError as exc:
            return Response({"error": "not_found", "detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
        target = data.get("targetTopic", "")
        return start_resend(request, cluster, data["group"], data.get("msgIds", []), target, data["all"])


class GroupDlqResend(ClusterAPIView):
    """POST ``{msgIds | all: true, targetTopic?}``: re-publish the group's dead letters, the
    ones named or every one stored now (operators)."""

    @documented(
        "Resend a group's dead letters (a long task)", request=GroupResendRequest, responses=RESEND_ANSWERS
    )
    def post(self, request: Request, cluster: str, group: str) -> Response:
        form = GroupResendRequest(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        target = data.get("targetTopic", "")
        return start_resend(request, self.cluster, group, data.get("msgIds", []), target, data["all"])


class DlqOverview(ClusterAPIView):
    """GET: every group with a dead-letter topic, its stored dead letters (the broker's
    offsets) and when the oldest and newest were stored; most dead letters first."""

    @documented("Dead letters of every group", responses=out.DlqOverviewOut)
    def get(self, request: Request, cluster: str) -> Response:
        return Response(self.admin(services.overview))


class GroupDlq(ClusterAPIView):
    """GET: a page of the group's dead letters (``?kind=retry`` for its retry queue).

    With ``?page=N`` (from 1, ``size`` per page, default 100): the Nth page of everything
    stored, with ``total``, the positions shown (``first``/``last``) and ``pages``.
    Otherwise by time: ``begin``/``end`` (epoch ms, default the last 3 days), ``cursor``,
    ``limit``.  Both narrow by ``tag`` and ``key``."""

    @documented("Browse a group's DLQ or retry messages", query=DlqBrowseQuery, responses=out.DlqPageOut)
    def get(self, request: Request, cluster: str, group: str) -> Response:
        asked = query(request, DlqBrowseQuery)
        kind, tag, key = asked["kind"], asked["tag"], asked["key"]
        if asked["page"] is not None:
            number = asked["page"]
            size = max(1, min(500, services.PAGE_SIZE if asked["size"] is None else asked["size"]))
            return Response(
                self.admin(lambda admin: services.page_of(admin, group, kind, number, tag, key, size))
            )
        now = int(time.time() * 1000)
        begin = now - 3 * 86_400_000 if asked["begin"] is None else asked["begin"]
        end = now if asked["end"] is None else asked["end"]
        limit, cursor = asked["limit"], asked["cursor"] or None
        page = self.admin(
            lambda admin: services.browse(admin, group, kind, begin, end, limit, cursor, tag, key)
        )
        return Response(page)


class GroupDlqExport(ClusterAPIView):
    """GET ``?format=csv|jsonl``: the group's dead letters with bodies (base64) and properties.
    Needs the export grant; at most 10,000 per file (``X-Quiver-Truncated: true`` when more)."""

    @documented(
        "Export a group's dead letters (CSV or JSON lines)",
        query=DlqExportQuery,
        responses={
            (200, "text/csv"): OpenApiTypes.BINARY,
            (200, "application/x-ndjson"): OpenApiTypes.BINARY,
        },
    )
    def get(self, request: Request, cluster: str, group: str) -> Any:
        if not allowed(request.user, cluster, "export"):
            return Response(
                {"error": "permission_denied", "detail": "exporting needs the export grant"}, status=403
            )
        asked = query(request, DlqExportQuery)
        fmt, kind, begin = asked["format"], asked["kind"], asked["begin"]
        end = int(time.time() * 1000) if asked["end"] is None else asked["end"]
        with audited(request, "dlq.export", self.cluster.name, f"{group} ({kind})") as audit:
            rows, truncated = self.admin(lambda admin: services.export_rows(admin, group, kind, begin, end))
            audit.after = {"messages": len(rows), "truncated": truncated, "format": fmt}
        body = services.as_csv(rows) if fmt == "csv" else services.as_jsonl(rows)
        response = HttpResponse(body, content_type="text/csv" if fmt == "csv" else "application/x-ndjson")
        response["Content-Disposition"] = f'attachment; filename="{group}-{kind}.{fmt}"'
        response["X-Quiver-Truncated"] = "true" if truncated else "false"
        return response
