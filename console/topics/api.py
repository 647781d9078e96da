"""REST endpoints of topics, under ``/api/clusters/<cluster>/topics/``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from broker_core.broker.topics import PERM_READ, PERM_WRITE, TopicConfig
from broker_core.errors import AdminError
from console.audit.services import audited
from console.core.apiviews import ClusterAPIView, documented
from console.core.brokers import on_every_master
from console.topics import services
from console.topics.serializers import TestMessage, TopicWrite
from nameserver import traffic

PAGE_SIZE_MAX = 500
PERMS = {"RW": PERM_READ | PERM_WRITE, "R-": PERM_READ, "-W": PERM_WRITE, "--": 0}


def page_of(request: Request, rows: list[Any]) -> dict[str, Any]:
    """``page`` (from 1) and ``page_size`` (up to 500) of ``rows``, with the total count."""
    try:
        page = max(1, int(request.query_params.get("page", 1)))
        size = max(1, min(PAGE_SIZE_MAX, int(request.query_params.get("page_size", 100))))
    except ValueError:
        raise AdminError("page and page_size must be integers") from None
    start = (page - 1) * size
    return {"count": len(rows), "page": page, "pageSize": size, "results": rows[start : start + size]}


class TopicWriter(ClusterAPIView):
    """Creates or updates a topic on every master (or one broker cluster's), audited."""

    def _write(self, request: Request, name: str, data: dict[str, Any], created: bool) -> Response:
        config = TopicConfig(
            name, data["readQueueNums"], data["writeQueueNums"], PERMS[data["perm"]], order=data["order"]
        )
        broker_cluster = data.get("brokerCluster") or None
        action = "topic.create" if created else "topic.update"
        with audited(request, action, self.cluster.name, name) as audit:
            audit.after = {**{k: v for k, v in data.items() if k != "name"}, "name": name}

            async def write(admin: Any) -> list[str]:
                if broker_cluster:
                    addrs = await admin.create_or_update_topic(config, cluster=broker_cluster)
                else:
                    addrs = await on_every_master(
                        admin, lambda addr: admin.create_or_update_topic(config, broker_addr=addr)
                    )
                await services.until_routed(admin, name)  # usable as soon as we answer
                return addrs

            brokers = self.admin(write)
        body = {"name": name, "brokers": brokers, **audit.after}
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class TopicList(TopicWriter):
    """GET: topics with type, brokers, queues and permission; ``search``, ``type`` (comma
    separated, default NORMAL,FIFO; ``all`` for every type), ``page``, ``page_size``.
    POST: create a topic."""

    @documented("List topics")
    def get(self, request: Request, cluster: str) -> Response:
        wanted = request.query_params.get("type", "")
        if wanted == "all":
            types = services.TYPES
        elif wanted:
            types = tuple(t.strip().upper() for t in wanted.split(",") if t.strip())
            unknown = [t for t in types if t not in services.TYPES]
            if unknown:
                raise AdminError(
                    f"unknown topic type(s) {', '.join(unknown)}; types: {', '.join(services.TYPES)}"
                )
        else:
            types = services.DEFAULT_TYPES
        rows, unreadable = self.admin(services.topic_rows)
        shown = services.filter_topics(rows, request.query_params.get("search", ""), types)
        return Response({**page_of(request, shown), "unreadableBrokers": unreadable})

    @documented("Create a topic", request=TopicWrite)
    def post(self, request: Request, cluster: str) -> Response:
        form = TopicWrite(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        if "name" not in data:
            raise AdminError("give the topic's name")
        return self._write(request, data["name"], data, created=True)


class TopicDetail(TopicWriter):
    """GET: route, per-queue offsets and retention span, consumers, and ``storedToday``
    (messages stored today, UTC, by the counters the dashboard reads).  PUT: update.
    DELETE (admin role): delete everywhere, only with ``?confirm=<topic>`` after the impact check."""

    needs = {"DELETE": "admin"}

    @documented("One topic: route, queues, consumers, messages stored today")
    def get(self, request: Request, cluster: str, topic: str) -> Response:
        detail = self.admin(lambda admin: services.topic_detail(admin, topic))
        detail["storedToday"] = traffic.topic_today(settings.QUIVER["HISTORY_DIR"], cluster, topic)
        return Response(detail)

    @documented("Update a topic", request=TopicWrite)
    def put(self, request: Request, cluster: str, topic: str) -> Response:
        form = TopicWrite(data=request.data)
        form.is_valid(raise_exception=True)
        return self._write(request, topic, form.validated_data, created=False)

    @documented("Delete a topic (after its impact check)")
    def delete(self, request: Request, cluster: str, topic: str) -> Response:
        if request.query_params.get("confirm") != topic:
            found = self.admin(lambda admin: services.impact(admin, topic))
            return Response(
                {
                    "error": "confirm",
                    "detail": f"check the impact, then repeat with ?confirm={topic}",
                    "impact": found,
                },
                status=status.HTTP_409_CONFLICT,
            )
        with audited(request, "topic.delete", self.cluster.name, topic) as audit:
            audit.before = self.admin(lambda admin: services.impact(admin, topic))
            brokers = self.admin(lambda admin: admin.delete_topic(topic))
            audit.after = {"deletedOn": brokers}
        return Response(status=status.HTTP_204_NO_CONTENT)


class TopicImpact(ClusterAPIView):
    """GET: what deleting the topic would touch (consumers, their lag, messages stored)."""

    @documented("Impact check before deleting a topic")
    def get(self, request: Request, cluster: str, topic: str) -> Response:
        return Response(self.admin(lambda admin: services.impact(admin, topic)))


class TopicMessageSend(ClusterAPIView):
    """POST: send a test message (body, tags, keys, user properties, delay level)."""

    @documented("Send a test message", request=TestMessage)
    def post(self, request: Request, cluster: str, topic: str) -> Response:
        form = TestMessage(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        with audited(request, "topic.send", self.cluster.name, topic) as audit:
            sent = self.admin(
                lambda admin: admin.send_message(
                    topic,
                    data["bytes"],
                    tags=data["tags"],
                    keys=data["keys"],
                    properties=data["properties"],
                    delay_level=data["delayLevel"],
                )
            )
            audit.after = sent
        return Response(sent, status=status.HTTP_201_CREATED)


class TopicOffsetByTime(ClusterAPIView):
    """GET ``?timestamp=<epoch ms>``: per queue, the first offset stored at or after it."""

    @documented("Find each queue's offset by time")
    def get(self, request: Request, cluster: str, topic: str) -> Response:
        try:
            timestamp = int(request.query_params["timestamp"])
        except (KeyError, ValueError):
            raise AdminError("give timestamp as epoch milliseconds") from None
        found = self.admin(lambda admin: admin.offsets_by_time(topic, timestamp))
        queues = [
            {"brokerName": q.broker_name, "queueId": q.queue_id, "offset": o}
            for q, o in sorted(found.items())
        ]
        return Response({"topic": topic, "timestamp": timestamp, "queues": queues})
