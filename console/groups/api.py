"""REST endpoints of consumer groups, under ``/api/clusters/<cluster>/groups/``: they parse,
call ``console.groups.services`` and respond (the write actions check, act and audit there)."""

from __future__ import annotations

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from console.core import apiviews
from console.core.apiviews import ClusterAPIView, documented, query
from console.groups import pop, services
from console.groups import serializers as out
from console.groups.models import GroupMonitor
from console.groups.serializers import (
    GroupConfigWrite,
    GroupListQuery,
    MonitorWrite,
    OffsetReset,
    ProducerQuery,
    group_config,
)


class GroupList(ClusterAPIView):
    """GET: groups with lag (messages and seconds behind), TPS, clients online, model;
    ``search``, ``system=true``, ``sort`` (group, lag, secondsBehind, consumeTps, clients; ``-``
    for descending), ``page``, ``page_size``.  POST: create a subscription group."""

    @documented(
        "List consumer groups with lag",
        query=GroupListQuery,
        responses=out.GroupPageOut,
        operation_id="clusters_groups_list",
    )
    def get(self, request: Request, cluster: str) -> Response:
        asked = query(request, GroupListQuery)
        rows, unreadable = self.admin(services.group_rows)
        shown = services.filter_groups(rows, asked["search"], asked["system"], asked["sort"])
        return Response(apiviews.page_of(shown, asked, unreadableBrokers=unreadable))

    @documented("Create a subscription group", request=GroupConfigWrite, responses={201: out.GroupWrittenOut})
    def post(self, request: Request, cluster: str) -> Response:
        data = apiviews.creation(request, GroupConfigWrite, "group")
        config = group_config(data["name"], data)
        brokers = services.create_group(request, self.cluster, config, data.get("brokerCluster", ""))
        return Response(
            {"group": config.group_name, "brokers": brokers, "config": config.to_json()},
            status=status.HTTP_201_CREATED,
        )


class GroupDetail(ClusterAPIView):
    """GET: per-queue progress, clients, subscriptions and config.  PUT: update the config
    (a ``consumeMessageOrderly`` it does not name is kept as stored).
    DELETE (admin role): only with ``?confirm=<group>`` after the impact check."""

    needs = {"DELETE": "admin"}

    @documented("One consumer group", responses=out.GroupDetailOut)
    def get(self, request: Request, cluster: str, group: str) -> Response:
        return Response(self.admin(lambda admin: services.group_detail(admin, group)))

    @documented("Update a subscription group", request=GroupConfigWrite, responses=out.GroupWrittenOut)
    def put(self, request: Request, cluster: str, group: str) -> Response:
        form = GroupConfigWrite(data=request.data)
        form.is_valid(raise_exception=True)
        data = services.with_stored_fifo(self.cluster, group, form.validated_data)
        config = group_config(group, data)
        brokers = services.update_group(request, self.cluster, config, data.get("brokerCluster", ""))
        return Response({"group": group, "brokers": brokers, "config": config.to_json()})

    @apiviews.documented_delete(
        "Delete a consumer group (after its impact check)", out.GroupDeleteUnconfirmedOut
    )
    def delete(self, request: Request, cluster: str, group: str) -> Response:
        return apiviews.confirmed_delete(self, group, services.delete_group, services.impact)


class GroupPop(ClusterAPIView):
    """GET: the group's pop consumption (RocketMQ 5 clients): in flight, acks per second,
    redelivered and dead-lettered, messages per delivery attempt, per queue; FIFO or not."""

    @documented("A consumer group's pop consumption (RocketMQ 5)", responses=out.GroupPopOut)
    def get(self, request: Request, cluster: str, group: str) -> Response:
        return Response(self.admin(lambda admin: pop.group_pop(admin, group)))


class GroupClient(ClusterAPIView):
    """GET: what one online client of the group says of itself (running info)."""

    @documented("A consumer client's running info", responses=out.RunningInfoOut)
    def get(self, request: Request, cluster: str, group: str, client_id: str) -> Response:
        text = self.admin(lambda admin: admin.consumer_running_info(group, client_id))
        return Response({"group": group, "clientId": client_id, "runningInfo": text})


# What both reset endpoints take and answer.
RESET = {"request": OffsetReset, "responses": out.ResetPlanOut}


def _reset_spec(request: Request) -> services.ResetSpec:
    """The reset the body asks for (``OffsetReset``), or a 400 naming what is wrong."""
    form = OffsetReset(data=request.data)
    form.is_valid(raise_exception=True)
    return services.ResetSpec.of(form.validated_data)


class OffsetPreview(ClusterAPIView):
    """POST: the per-queue change a reset would make (current, new, delta); changes nothing,
    so viewers may ask too."""

    needs = {"POST": "view"}

    @documented("Preview an offset reset", operation_id="groups_offsets_preview", **RESET)
    def post(self, request: Request, cluster: str, group: str) -> Response:
        spec = _reset_spec(request)
        plan = services.preview_reset(request, self.cluster, group, spec)
        return Response({"group": group, "topic": spec.topic, "mode": spec.mode, "queues": plan})


class OffsetReset_(ClusterAPIView):  # noqa: N801 (the serializer has the plain name)
    """POST: reset the group's offsets on a topic (online or offline); the per-queue result."""

    @documented("Reset a group's offsets", operation_id="groups_offsets_reset", **RESET)
    def post(self, request: Request, cluster: str, group: str) -> Response:
        spec = _reset_spec(request)
        result = services.reset_offsets(request, self.cluster, group, spec)
        body = {"group": group, "topic": spec.topic, "mode": spec.mode, "queues": result}
        return Response({**body, "ok": all(p["ok"] for p in result)})


class ProducerConnections(ClusterAPIView):
    """GET ``?topic=``: the producers of a producer group connected now (to the topic's masters)."""

    @documented(
        "Producers of a producer group online now", query=ProducerQuery, responses=out.ProducerConnectionsOut
    )
    def get(self, request: Request, cluster: str, group: str) -> Response:
        topic = query(request, ProducerQuery)["topic"] or None
        found = self.admin(lambda admin: admin.producer_connections(group, topic))
        return Response({"group": group, "topic": topic, "connections": [c.to_json() for c in found]})


class MonitorList(ClusterAPIView):
    """GET: every group's thresholds on this cluster."""

    @documented("Consumer-group thresholds of a cluster", responses=out.MonitorListOut)
    def get(self, request: Request, cluster: str) -> Response:
        rows = GroupMonitor.objects.filter(cluster=self.cluster.name)
        return Response({"monitors": [row.to_json() for row in rows]})


def _no_thresholds(group: str) -> Response:
    return Response({"error": "not_found", "detail": f"no thresholds for {group}"}, status=404)


class Monitor(ClusterAPIView):
    """GET, PUT (operators), DELETE (operators): one group's thresholds."""

    @documented("A consumer group's thresholds", responses=out.MonitorOut)
    def get(self, request: Request, cluster: str, group: str) -> Response:
        row = GroupMonitor.objects.filter(cluster=self.cluster.name, group=group).first()
        return _no_thresholds(group) if row is None else Response(row.to_json())

    @documented("Set a consumer group's thresholds", request=MonitorWrite, responses=out.MonitorOut)
    def put(self, request: Request, cluster: str, group: str) -> Response:
        form = MonitorWrite(data=request.data)
        form.is_valid(raise_exception=True)
        row = services.save_thresholds(request, self.cluster, group, form.validated_data)
        return Response(row.to_json())

    @documented("Remove a consumer group's thresholds", responses={204: None})
    def delete(self, request: Request, cluster: str, group: str) -> Response:
        if not services.remove_thresholds(request, self.cluster, group):
            return _no_thresholds(group)
        return Response(status=status.HTTP_204_NO_CONTENT)
