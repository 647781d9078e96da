"""REST endpoints of messages, under ``/api/clusters/<cluster>/``."""

from __future__ import annotations

import time
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from broker_core.client.admin import DEFAULT_QUERY_MAX_NUM, AdminClient
from broker_core.errors import AdminError
from broker_core.model.message import MessageExt
from console.core.apiviews import ClusterAPIView, documented, query
from console.messages import search, services, trace
from console.messages import serializers as out
from console.messages.serializers import BrowseQuery, ByKeyQuery, DetailQuery, TraceQuery

HOUR_MS = 3_600_000


class TopicMessages(ClusterAPIView):
    """GET ``?begin=&end=`` (epoch ms or ISO 8601, UTC unless an offset is given; default the
    last hour) ``&tags=`` (``A || B``) ``&limit=`` (up to 500), or ``?cursor=`` for the next
    page: messages newest first, merged across the topic's queues, with scan progress and
    an explicit ``truncated``."""

    @documented(
        "Browse a topic's messages by time and tag, newest first (cursor paging)",
        query=BrowseQuery,
        responses=out.BrowsePageOut,
    )
    def get(self, request: Request, cluster: str, topic: str) -> Response:
        asked = query(request, BrowseQuery)
        now = int(time.time() * 1000)
        begin: int = now - HOUR_MS if asked["begin"] is None else asked["begin"]
        end: int = now if asked["end"] is None else asked["end"]
        cursor, tags, limit = asked["cursor"] or None, asked["tags"] or None, asked["limit"]
        page = self.admin(lambda admin: services.browse(admin, topic, begin, end, limit, cursor, tags=tags))
        return Response(page)


class MessageSearch(ClusterAPIView):
    """GET ``?q=`` (``&topic=``): find a message from any id or key a person has: the
    broker's offset message id, the client's message id (UNIQ_KEY, what producers log) or a
    key.  Without a topic, every topic of the cluster is searched (bounded; the answer says
    how many).  Nothing found is a 200 with no messages, saying what was searched and what
    to try; text that cannot be an id or a key is a 400 saying why."""

    @extend_schema(
        summary="Find messages by offset id, client id (UNIQ_KEY) or key, in one topic or all",
        parameters=[
            OpenApiParameter("q", str, required=True, description="an offset msgId, a client msgId or a key"),
            OpenApiParameter("topic", str, description="search only this topic (default: every topic)"),
        ],
        responses=out.SearchOut,
    )
    def get(self, request: Request, cluster: str) -> Response:
        text = request.query_params.get("q", "")
        topic = request.query_params.get("topic") or None
        found = self.admin(lambda admin: search.run(admin, text, topic))
        return Response(search.as_json(found))


class MessagesByKey(ClusterAPIView):
    """GET ``?topic=&key=`` (``&begin=&end=``): messages whose KEYS hold ``key``, from the index."""

    @documented("Find messages by key", query=ByKeyQuery, responses=out.ByKeyOut)
    def get(self, request: Request, cluster: str) -> Response:
        asked = query(request, ByKeyQuery)
        topic, key, begin, end = asked["topic"], asked["key"], asked["begin"], asked["end"]
        found = self.admin(lambda admin: admin.query_by_key(topic, key, begin_ms=begin, end_ms=end))
        rows = [services.summary(m) for m in found]
        # The index answers at most DEFAULT_QUERY_MAX_NUM per broker: say when that bound was hit.
        return Response(
            {"topic": topic, "key": key, "messages": rows, "truncated": len(rows) >= DEFAULT_QUERY_MAX_NUM}
        )


class MessageDetail(ClusterAPIView):
    """GET: one message by its offset msgId or its client msgId (UNIQ_KEY; ``?topic=``
    narrows the search, every topic is searched without it): properties, body as text /
    JSON / hex (``?charset=``), and which groups consumed it."""

    @documented(
        "One message, its body views and its consumption by group",
        query=DetailQuery,
        responses=out.MessageDetailOut,
    )
    def get(self, request: Request, cluster: str, msg_id: str) -> Response:
        asked = query(request, DetailQuery)
        topic, charset = asked["topic"] or None, asked["charset"]

        async def look(admin: AdminClient) -> tuple[MessageExt, list[Any]]:
            msg = await search.find(admin, msg_id, topic)
            track = await admin.message_track(msg.msg_id)
            return msg, track

        msg, track = self.admin(look)
        return Response({**services.detail(msg, charset), "consumedBy": [t.to_json() for t in track]})


class MessageResend(ClusterAPIView):
    """POST ``{group, clientId}``: have that online consumer of the group consume the message now."""

    @documented("Resend a message to one consumer of a group", responses=out.ConsumerResendOut)
    def post(self, request: Request, cluster: str, msg_id: str) -> Response:
        group, client_id = request.data.get("group"), request.data.get("clientId")
        if not isinstance(group, str) or not isinstance(client_id, str):
            raise AdminError("give group and clientId (an online consumer of the group)")
        result = services.resend_to_client(request, self.cluster, msg_id, group, client_id)
        return Response(
            {"msgId": msg_id, "group": group, "clientId": client_id, "result": result},
            status=status.HTTP_200_OK,
        )


class MessageTrace(ClusterAPIView):
    """GET ``?traceTopic=`` (default RMQ_SYS_TRACE_TOPIC): the message's trace as RocketMQ's
    clients record it with tracing on: published when, by whom, how long it took; per
    consumer group each attempt with its cost and outcome."""

    @documented(
        "A message's trace: publication and consumption by group", query=TraceQuery, responses=out.TraceOut
    )
    def get(self, request: Request, cluster: str, msg_id: str) -> Response:
        topic = query(request, TraceQuery)["traceTopic"] or trace.DEFAULT_TRACE_TOPIC

        async def look(admin: AdminClient) -> list[str]:
            found = await admin.query_by_key(topic, msg_id)
            return [m.body.decode("utf-8", errors="replace") for m in found]

        bodies = self.admin(look)
        return Response({**trace.trace_of(msg_id, bodies), "traceTopic": topic})
