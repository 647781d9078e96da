"""REST endpoints of the lag alerts: ``/api/clusters/<cluster>/alerts/`` (cluster viewers
may read) and ``/api/alerts/`` over every cluster the user may view."""

from __future__ import annotations

from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.alerts import queries
from console.alerts import serializers as out
from console.alerts.models import Alert
from console.core.access import allowed
from console.core.apiviews import ClusterAPIView, documented, query


class AlertList(ClusterAPIView):
    """GET: the cluster's alerts, newest first; ``group``, ``kind``, ``state`` (open,
    resolved, all), ``page``, ``page_size``; ``openCount`` counts the open ones."""

    @documented(
        "Lag alerts of a cluster",
        query=queries.AlertFilter,
        responses=out.ClusterAlertPageOut,
        operation_id="clusters_alerts_list",
    )
    def get(self, request: Request, cluster: str) -> Response:
        data = query(request, queries.AlertFilter)
        rows = queries.alerts([self.cluster.name], {**data, "cluster": None})
        open_count = Alert.objects.filter(cluster=self.cluster.name, resolved_at__isnull=True).count()
        return Response({**queries.page(rows, data["page"], data["page_size"]), "openCount": open_count})


class AlertDetail(ClusterAPIView):
    """GET: one alert of the cluster."""

    @documented("One lag alert", responses={200: out.AlertOut, 404: out.AlertNotFoundOut})
    def get(self, request: Request, cluster: str, alert_id: int) -> Response:
        alert = Alert.objects.filter(cluster=self.cluster.name, pk=alert_id).first()
        if alert is None:
            return Response({"error": "not_found", "detail": f"no alert {alert_id} on {cluster}"}, status=404)
        return Response(alert.to_json())


class AllAlerts(APIView):
    """GET: alerts of every cluster the user may view (``cluster`` narrows), same filters."""

    permission_classes = [IsAuthenticated]

    @documented("Lag alerts of every cluster", query=queries.AlertFilter, responses=out.AlertPageOut)
    def get(self, request: Request) -> Response:
        data = query(request, queries.AlertFilter)
        names = Alert.objects.values_list("cluster", flat=True).distinct()
        visible = [name for name in names if allowed(request.user, name, "view")]
        rows = queries.alerts(visible, data)
        return Response(queries.page(rows, data["page"], data["page_size"]))
