"""REST endpoints of the maintenance jobs: their status (last runs, overdue) and run-now."""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError
from rest_framework import status
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.core.apiviews import documented
from console.maintenance import serializers as out
from console.maintenance import tasks
from console.maintenance.jobs import job_specs
from console.maintenance.services import job_overview

FANOUT_TASKS = {
    "delay_scan": tasks.delay_scan_all,
    "offset_persistence": tasks.offset_persistence_all,
    "file_expiry": tasks.file_expiry_all,
    "history_retention": tasks.prune_history,
}


def _redis_down(exc: RedisError) -> Response:
    return Response(
        {"error": "redis_unavailable", "detail": f"the platform's Redis did not answer: {exc}"},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
    )


class JobList(APIView):
    """GET: every job with its schedule, its last run per broker, and whether it is overdue."""

    @documented(
        "Maintenance jobs: last runs, overdue, failing",
        responses={200: out.JobOverviewOut, 400: out.JobErrorOut, 503: out.JobErrorOut},
    )
    def get(self, request: Request) -> Response:
        try:
            overview = job_overview(limit=int(request.query_params.get("recent", 20) or 20))
        except RedisError as exc:
            return _redis_down(exc)
        except ValueError:
            return Response({"error": "bad_request", "detail": "recent must be an integer"}, status=400)
        return Response(overview)


class JobRun(APIView):
    """POST: run a job now on every broker (queued to Celery); answers 202 with the task id."""

    permission_classes = [IsAdminUser]

    @documented(
        "Run a maintenance job now on every broker",
        responses={202: out.JobQueuedOut, 404: out.JobErrorOut, 503: out.JobErrorOut},
    )
    def post(self, request: Request, job: str) -> Response:
        task = FANOUT_TASKS.get(job)
        if task is None:
            known = ", ".join(sorted(job_specs()))
            return Response({"error": "not_found", "detail": f"no job {job!r} (jobs: {known})"}, status=404)
        try:
            result: Any = task.delay()
        except (RedisError, OSError) as exc:
            return Response(
                {"error": "queue_unavailable", "detail": f"the job could not be queued: {exc}"}, status=503
            )
        return Response({"job": job, "taskId": result.id}, status=status.HTTP_202_ACCEPTED)
