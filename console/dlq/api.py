"""REST endpoints of the DLQ: start a bulk resend (a long task the client then follows)."""

from __future__ import annotations

from redis.exceptions import RedisError
from rest_framework import status
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from console.core.apiviews import documented
from console.core.longtasks import launch
from console.dlq.serializers import ResendRequest
from console.dlq.tasks import long_resend_dlq
from nameserver.clusters import find_cluster


class Resend(APIView):
    """POST {group, msgIds, cluster?}: queue the resend; 202 with the task to follow."""

    permission_classes = [IsAdminUser]

    @documented("Resend dead letters (a long task)", request=ResendRequest)
    def post(self, request: Request) -> Response:
        form = ResendRequest(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            cluster = find_cluster(data["cluster"])
        except LookupError as exc:
            return Response({"error": "not_found", "detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
        ids = list(dict.fromkeys(data["msgIds"]))  # each message once, in the order given
        params = {"namesrv_addr": cluster.namesrv_addr, "group": data["group"], "msg_ids": ids}
        title = f"Resend {len(ids)} DLQ message(s) of {data['group']} ({cluster.name})"
        try:
            row = launch(long_resend_dlq, "dlq_resend", title, request.user, params)
        except (RedisError, OSError) as exc:
            return Response(
                {"error": "queue_unavailable", "detail": f"the task could not be queued: {exc}"}, status=503
            )
        url = reverse("core:api-task", args=[row.id], request=request)
        return Response({"taskId": str(row.id), "url": url}, status=status.HTTP_202_ACCEPTED)
