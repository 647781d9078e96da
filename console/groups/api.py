"""REST endpoints of consumer groups, under ``/api/clusters/<cluster>/groups/``."""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from broker_core.broker.groups import SubscriptionGroupConfig
from broker_core.errors import AdminError
from console.audit.services import audited
from console.core.apiviews import ClusterAPIView, documented
from console.core.brokers import on_every_master
from console.groups import services
from console.groups.models import GroupMonitor
from console.groups.monitors import save_monitor
from console.groups.serializers import GroupConfigWrite, MonitorWrite, OffsetReset
from console.topics.api import page_of


class GroupWriter(ClusterAPIView):
    """Stores a subscription-group config on every master (or one broker cluster's), audited."""

    def _write(self, request: Request, name: str, data: dict[str, Any], created: bool) -> Response:
        config = SubscriptionGroupConfig(
            name,
            consume_enable=data["consumeEnable"],
            consume_from_min_enable=data["consumeFromMinEnable"],
            consume_broadcast_enable=data["consumeBroadcastEnable"],
            retry_queue_nums=data["retryQueueNums"],
            retry_max_times=data["retryMaxTimes"],
        )
        broker_cluster = data.get("brokerCluster") or None
        with audited(
            request, "group.create" if created else "group.update", self.cluster.name, name
        ) as audit:
            audit.after = config.to_json()

            async def write(admin: Any) -> list[str]:
                if broker_cluster:
                    return await admin.create_or_update_subscription_group(config, cluster=broker_cluster)
                return await on_every_master(
                    admin, lambda addr: admin.create_or_update_subscription_group(config, broker_addr=addr)
                )

            brokers = self.admin(write)
        body = {"group": name, "brokers": brokers, "config": config.to_json()}
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class GroupList(GroupWriter):
    """GET: groups with lag (messages and seconds behind), TPS, clients online, model;
    ``search``, ``system=true``, ``sort`` (group, lag, secondsBehind, consumeTps, clients; ``-``
    for descending), ``page``, ``page_size``.  POST: create a subscription group."""

    @documented("List consumer groups with lag")
    def get(self, request: Request, cluster: str) -> Response:
        rows, unreadable = self.admin(services.group_rows)
        shown = services.filter_groups(
            rows,
            request.query_params.get("search", ""),
            request.query_params.get("system", "") in ("1", "true"),
            request.query_params.get("sort", "group"),
        )
        return Response({**page_of(request, shown), "unreadableBrokers": unreadable})

    @documented("Create a subscription group", request=GroupConfigWrite)
    def post(self, request: Request, cluster: str) -> Response:
        form = GroupConfigWrite(data=request.data)
        form.is_valid(raise_exception=True)
        if "name" not in form.validated_data:
            raise AdminError("give the group's name")
        return self._write(request, form.validated_data["name"], form.validated_data, created=True)


class GroupDetail(GroupWriter):
    """GET: per-queue progress, clients, subscriptions and config.  PUT: update the config.
    DELETE (admin role): only with ``?confirm=<group>`` after the impact check."""

    needs = {"DELETE": "admin"}

    @documented("One consumer group")
    def get(self, request: Request, cluster: str, group: str) -> Response:
        return Response(self.admin(lambda admin: services.group_detail(admin, group)))

    @documented("Update a subscription group", request=GroupConfigWrite)
    def put(self, request: Request, cluster: str, group: str) -> Response:
        form = GroupConfigWrite(data=request.data)
        form.is_valid(raise_exception=True)
        return self._write(request, group, form.validated_data, created=False)

    @documented("Delete a consumer group (after its impact check)")
    def delete(self, request: Request, cluster: str, group: str) -> Response:
        if request.query_params.get("confirm") != group:
            found = self.admin(lambda admin: services.impact(admin, group))
            body = {"error": "confirm", "detail": f"check the impact, then repeat with ?confirm={group}"}
            return Response({**body, "impact": found}, status=status.HTTP_409_CONFLICT)
        with audited(request, "group.delete", self.cluster.name, group) as audit:
            audit.before = self.admin(lambda admin: services.impact(admin, group))

            async def delete(admin: Any) -> list[str]:
                return await on_every_master(
                    admin,
                    lambda addr: admin.delete_subscription_group(group, broker_addr=addr, remove_offset=True),
                )

            audit.after = {"deletedOn": self.admin(delete)}
        return Response(status=status.HTTP_204_NO_CONTENT)


class GroupClient(ClusterAPIView):
    """GET: what one online client of the group says of itself (running info)."""

    @documented("A consumer client's running info")
    def get(self, request: Request, cluster: str, group: str, client_id: str) -> Response:
        text = self.admin(lambda admin: admin.consumer_running_info(group, client_id))
        return Response({"group": group, "clientId": client_id, "runningInfo": text})


def _plan_args(data: dict[str, Any]) -> dict[str, Any]:
    if data["mode"] == "timestamp":
        return {"timestamp": data["timestamp"]}
    if data["mode"] == "exact":
        return {"offsets": {(o["brokerName"], o["queueId"]): o["offset"] for o in data["offsets"]}}
    return {}


class OffsetPreview(ClusterAPIView):
    """POST: the per-queue change a reset would make (current, new, delta); changes nothing,
    so viewers may ask too."""

    needs = {"POST": "view"}

    @documented("Preview an offset reset", request=OffsetReset, operation_id="groups_offsets_preview")
    def post(self, request: Request, cluster: str, group: str) -> Response:
        form = OffsetReset(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        plan = self.admin(
            lambda admin: services.plan_reset(admin, group, data["topic"], data["mode"], **_plan_args(data))
        )
        return Response({"group": group, "topic": data["topic"], "mode": data["mode"], "queues": plan})


class OffsetReset_(ClusterAPIView):  # noqa: N801 (the serializer has the plain name)
    """POST: reset the group's offsets on a topic (online or offline); the per-queue result."""

    @documented("Reset a group's offsets", request=OffsetReset, operation_id="groups_offsets_reset")
    def post(self, request: Request, cluster: str, group: str) -> Response:
        form = OffsetReset(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        target = f"{group}@{data['topic']}"
        with audited(request, "group.offsets.reset", self.cluster.name, target) as audit:
            plan = self.admin(
                lambda admin: services.plan_reset(
                    admin, group, data["topic"], data["mode"], **_plan_args(data)
                )
            )
            audit.before = {f"{p['brokerName']}:{p['queueId']}": p["currentOffset"] for p in plan}
            result = self.admin(lambda admin: services.apply_reset(admin, group, data["topic"], plan))
            audit.after = {f"{p['brokerName']}:{p['queueId']}": p["resultOffset"] for p in result}
        body = {"group": group, "topic": data["topic"], "mode": data["mode"], "queues": result}
        return Response({**body, "ok": all(p["ok"] for p in result)})


class ProducerConnections(ClusterAPIView):
    """GET ``?topic=``: the producers of a producer group connected now (to the topic's masters)."""

    @documented("Producers of a producer group online now")
    def get(self, request: Request, cluster: str, group: str) -> Response:
        topic = request.query_params.get("topic") or None
        found = self.admin(lambda admin: admin.producer_connections(group, topic))
        return Response({"group": group, "topic": topic, "connections": [c.to_json() for c in found]})


class MonitorList(ClusterAPIView):
    """GET: every group's thresholds on this cluster."""

    @documented("Consumer-group thresholds of a cluster")
    def get(self, request: Request, cluster: str) -> Response:
        rows = GroupMonitor.objects.filter(cluster=self.cluster.name)
        return Response({"monitors": [row.to_json() for row in rows]})


class Monitor(ClusterAPIView):
    """GET, PUT (operators), DELETE (operators): one group's thresholds."""

    @documented("A consumer group's thresholds")
    def get(self, request: Request, cluster: str, group: str) -> Response:
        row = GroupMonitor.objects.filter(cluster=self.cluster.name, group=group).first()
        if row is None:
            return Response({"error": "not_found", "detail": f"no thresholds for {group}"}, status=404)
        return Response(row.to_json())

    @documented("Set a consumer group's thresholds", request=MonitorWrite)
    def put(self, request: Request, cluster: str, group: str) -> Response:
        form = MonitorWrite(data=request.data)
        form.is_valid(raise_exception=True)
        row = save_monitor(request, self.cluster.name, group, form.validated_data)
        return Response(row.to_json())

    @documented("Remove a consumer group's thresholds")
    def delete(self, request: Request, cluster: str, group: str) -> Response:
        rows = GroupMonitor.objects.filter(cluster=self.cluster.name, group=group)
        if not rows.exists():
            return Response({"error": "not_found", "detail": f"no thresholds for {group}"}, status=404)
        with audited(request, "group.monitor.delete", self.cluster.name, group) as audit:
            audit.before = rows.first().to_json()  # type: ignore[union-attr]
            rows.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)
