"""REST endpoints of the long tasks: list them and follow one (state, progress, outcome)."""

from __future__ import annotations

from django.db.models import QuerySet
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.core import serializers as out
from console.core.apiviews import documented
from console.core.longtasks import status
from console.core.models import LongTask


def visible_tasks(request: Request) -> QuerySet[LongTask]:
    """Staff see every task; other users the tasks they started."""
    tasks = LongTask.objects.select_related("requested_by")
    return tasks if request.user.is_staff else tasks.filter(requested_by=request.user)


class TaskList(APIView):
    """GET: the latest long tasks (``?kind=`` filters, ``?limit=`` up to 200)."""

    @documented(
        "Long tasks you started (all, for staff)",
        operation_id="tasks_list",
        responses={200: out.TaskListOut, 400: out.TaskErrorOut, 503: out.TaskErrorOut},
    )
    def get(self, request: Request) -> Response:
        tasks = visible_tasks(request)
        if kind := request.query_params.get("kind"):
            tasks = tasks.filter(kind=kind)
        try:
            limit = max(1, min(200, int(request.query_params.get("limit", 50))))
        except ValueError:
            return Response({"error": "bad_request", "detail": "limit must be an integer"}, status=400)
        try:
            return Response({"tasks": [status(row) for row in tasks[:limit]]})
        except RedisError as exc:
            return Response({"error": "redis_unavailable", "detail": str(exc)}, status=503)


class TaskDetail(APIView):
    """GET: one task's state, progress and, once finished, its result or error."""

    @documented(
        "One long task: state, progress, outcome",
        responses={200: out.TaskOut, 404: out.TaskErrorOut, 503: out.TaskErrorOut},
    )
    def get(self, request: Request, task_id: str) -> Response:
        row = visible_tasks(request).filter(id=task_id).first()
        if row is None:
            return Response({"error": "not_found", "detail": f"no task {task_id}"}, status=404)
        try:
            return Response(status(row))
        except RedisError as exc:
            return Response({"error": "redis_unavailable", "detail": str(exc)}, status=503)
