"""REST endpoints of topics, under ``/api/clusters/<cluster>/topics/``: they parse, call
``console.topics.services`` and respond (the write actions check, act and audit there)."""

from __future__ import annotations

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from console.clusters import traffic
from console.core import apiviews
from console.core.apiviews import ClusterAPIView, documented, query
from console.quiver import platform_settings
from console.topics import serializers as out
from console.topics import services
from console.topics.serializers import OffsetByTimeQuery, TestMessage, TopicListQuery, TopicWrite


class TopicList(ClusterAPIView):
    """GET: topics with type, brokers, queues and permission; ``search``, ``type`` (comma
    separated, default NORMAL,FIFO; ``all`` for every type), ``page``, ``page_size``.
    POST: create a topic."""

    @documented(
        "List topics", query=TopicListQuery, responses=out.TopicPageOut, operation_id="clusters_topics_list"
    )
    def get(self, request: Request, cluster: str) -> Response:
        asked = query(request, TopicListQuery)
        rows, unreadable = self.admin(services.topic_rows)
        shown = services.filter_topics(rows, asked["search"], asked["type"])
        return Response(apiviews.page_of(shown, asked, unreadableBrokers=unreadable))

    @documented("Create a topic", request=TopicWrite, responses={201: out.TopicWrittenOut})
    def post(self, request: Request, cluster: str) -> Response:
        data = apiviews.creation(request, TopicWrite, "topic")
        spec = services.TopicSpec.of(data["name"], data)
        brokers = services.create_topic(request, self.cluster, spec)
        return Response(
            {"name": spec.name, "brokers": brokers, **spec.to_json()}, status=status.HTTP_201_CREATED
        )


class TopicDetail(ClusterAPIView):
    """GET: route, per-queue offsets and retention span, consumers, and ``storedToday``
    (messages stored today, UTC, by the counters the dashboard reads).  PUT: update.
    DELETE (admin role): delete everywhere, only with ``?confirm=<topic>`` after the impact check."""

    needs = {"DELETE": "admin"}

    @documented("One topic: route, queues, consumers, messages stored today", responses=out.TopicDetailOut)
    def get(self, request: Request, cluster: str, topic: str) -> Response:
        detail = self.admin(lambda admin: services.topic_detail(admin, topic))
        detail["storedToday"] = traffic.topic_today(platform_settings()["HISTORY_DIR"], cluster, topic)
        return Response(detail)

    @documented("Update a topic", request=TopicWrite, responses=out.TopicWrittenOut)
    def put(self, request: Request, cluster: str, topic: str) -> Response:
        form = TopicWrite(data=request.data)
        form.is_valid(raise_exception=True)
        spec = services.TopicSpec.of(topic, form.validated_data)
        brokers = services.update_topic(request, self.cluster, spec)
        return Response({"name": topic, "brokers": brokers, **spec.to_json()})

    @apiviews.documented_delete("Delete a topic (after its impact check)", out.TopicDeleteUnconfirmedOut)
    def delete(self, request: Request, cluster: str, topic: str) -> Response:
        return apiviews.confirmed_delete(self, topic, services.delete_topic, services.impact)


class TopicImpact(ClusterAPIView):
    """GET: what deleting the topic would touch (consumers, their lag, messages stored)."""

    @documented("Impact check before deleting a topic", responses=out.TopicImpactOut)
    def get(self, request: Request, cluster: str, topic: str) -> Response:
        return Response(self.admin(lambda admin: services.impact(admin, topic)))


class TopicMessageSend(ClusterAPIView):
    """POST: send a test message (body, tags, keys, user properties, delay level)."""

    @documented("Send a test message", request=TestMessage, responses={201: out.SentOut})
    def post(self, request: Request, cluster: str, topic: str) -> Response:
        form = TestMessage(data=request.data)
        form.is_valid(raise_exception=True)
        sent = services.send_test_message(request, self.cluster, topic, form.validated_data)
        return Response(sent, status=status.HTTP_201_CREATED)


class TopicOffsetByTime(ClusterAPIView):
    """GET ``?timestamp=<epoch ms>``: per queue, the first offset stored at or after it."""

    @documented("Find each queue's offset by time", query=OffsetByTimeQuery, responses=out.OffsetsByTimeOut)
    def get(self, request: Request, cluster: str, topic: str) -> Response:
        timestamp = query(request, OffsetByTimeQuery)["timestamp"]
        found = self.admin(lambda admin: admin.offsets_by_time(topic, timestamp))
        queues = [
            {"brokerName": q.broker_name, "queueId": q.queue_id, "offset": o}
            for q, o in sorted(found.items())
        ]
        return Response({"topic": topic, "timestamp": timestamp, "queues": queues})
