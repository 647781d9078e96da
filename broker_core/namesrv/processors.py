"""The nameserver's request handlers: one method per request code, over ``RouteInfoManager``.

Request headers arrive as ``ext_fields`` strings (numbers already coerced by the codec);
responses carry strings too, and bodies are standard JSON (the C++ client accepts quoted
``brokerAddrs`` keys; queue counts and perm stay JSON numbers).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable
from typing import Any

import orjson

from broker_core.namesrv.routeinfo import ORDER_TOPIC_CONFIG_NAMESPACE, RouteInfoManager
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.store.configfile import DataVersion

log = logging.getLogger(__name__)

Handler = Callable[[RemotingCommand, Any], RemotingCommand]


class BadRequest(Exception):
    """A request whose header or body is missing or malformed (answered SYSTEM_ERROR)."""


def _field(request: RemotingCommand, name: str) -> str:
    value = request.ext_fields.get(name)
    if value is None or value == "":
        raise BadRequest(f"the request header lacks {name!r}")
    return value


def _int_field(request: RemotingCommand, name: str, default: int | None = None) -> int:
    value = request.ext_fields.get(name)
    if value in (None, "") and default is not None:
        return default
    try:
        return int(_field(request, name))
    except ValueError as exc:
        raise BadRequest(f"header field {name!r} is not a number: {request.ext_fields.get(name)!r}") from exc


def _json_body(request: RemotingCommand) -> dict[str, Any]:
    try:
        obj = orjson.loads(request.body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise BadRequest("the request body must be a JSON object")
    return obj


class NamesrvProcessor:
    """Answers brokers, clients and admin tools from the route tables."""

    def __init__(self, routes: RouteInfoManager) -> None:
        self.routes = routes
        self.handlers: dict[int, Handler] = {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.cluster_info,
            RequestCode.QUIVER_GET_BROKER_LIVE_INFO: self.broker_live_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.topic_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.topics_by_cluster,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.PUT_KV_CONFIG: self.put_kv,
            RequestCode.GET_KV_CONFIG: self.get_kv,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.kv_list,
        }

    def handle(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """Dispatch by code; malformed requests get SYSTEM_ERROR with the reason."""
        handler = self.handlers.get(request.code)
        if handler is None:
            return request.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request type {request.code} not supported"
            )
        try:
            return handler(request, conn)
        except BadRequest as exc:
            log.warning("bad request %s from %s: %s", request.code, getattr(conn, "remote_address", "?"), exc)
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))

    # -- brokers -------------------------------------------------------------------------

    def register_broker(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        if request.ext_fields.get("compressed", "false").lower() == "true":
            raise BadRequest("compressed registration bodies are not supported: set compressedRegister=false")
        expected_crc = _int_field(request, "bodyCrc32", 0)
        if expected_crc and expected_crc != zlib.crc32(request.body) & 0x7FFFFFFF:
            return request.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        body = _json_body(request) if request.body else {}
        wrapper = body.get("topicConfigSerializeWrapper") or {}
        topic_configs = wrapper.get("topicConfigTable")
        if topic_configs is not None and not isinstance(topic_configs, dict):
            raise BadRequest("topicConfigTable must be a JSON object")
        version = DataVersion.from_json(wrapper.get("dataVersion") or {})
        result = self.routes.register_broker(
            cluster_name=_field(request, "clusterName"),
            broker_addr=_field(request, "brokerAddr"),
            broker_name=_field(request, "brokerName"),
            broker_id=_int_field(request, "brokerId"),
            ha_server_addr=request.ext_fields.get("haServerAddr", ""),
            data_version=version,
            topic_configs=topic_configs,
            filter_servers=list(body.get("filterServerList") or []),
            channel=conn,
        )
        order_conf = self.routes.kv_list(ORDER_TOPIC_CONFIG_NAMESPACE)
        return request.response(
            ext_fields={"haServerAddr": result.ha_server_addr, "masterAddr": result.master_addr},
            body=orjson.dumps({"table": order_conf}) if order_conf else b"",
        )

    def unregister_broker(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        self.routes.unregister_broker(
            _field(request, "clusterName"),
            _field(request, "brokerAddr"),
            _field(request, "brokerName"),
            _int_field(request, "brokerId"),
        )
        return request.response()

    def query_data_version(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        addr = _field(request, "brokerAddr")
        theirs = DataVersion.from_json(_json_body(request)) if request.body else DataVersion(0, 0)
        ours = self.routes.data_version_of(addr)
        changed = ours is None or (ours.counter, ours.timestamp) != (theirs.counter, theirs.timestamp)
        self.routes.update_live_timestamp(addr)
        return request.response(
            ext_fields={"changed": "true" if changed else "false"},
            body=orjson.dumps(ours.to_json()) if ours is not None else b"",
        )

    # -- clients and tools ------------------------------------------------------------------

    def get_route(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        topic = _field(request, "topic")
        route = self.routes.pickup_topic_route(topic)
        if route is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}"
            )
        return request.response(body=orjson.dumps(route))

    def cluster_info(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        return request.response(body=orjson.dumps(self.routes.cluster_info()))

    def broker_live_info(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """When each registered broker last registered (its heartbeat), epoch ms by address."""
        live = {addr: info.last_update_ms for addr, info in sorted(self.routes.broker_live_table.items())}
        return request.response(body=orjson.dumps({"lastUpdateTimestamp": live}))

    def topic_list(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        return request.response(body=orjson.dumps({"topicList": self.routes.topic_list()}))

    def topics_by_cluster(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        topics = self.routes.topics_by_cluster(_field(request, "cluster"))
        return request.response(body=orjson.dumps({"topicList": topics}))

    def delete_topic(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        self.routes.delete_topic(_field(request, "topic"), request.ext_fields.get("clusterName") or None)
        return request.response()

    def wipe_write_perm(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        count = self.routes.wipe_write_perm(_field(request, "brokerName"))
        return request.response(ext_fields={"wipeTopicCount": str(count)})

    def put_kv(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        self.routes.put_kv(_field(request, "namespace"), _field(request, "key"), _field(request, "value"))
        return request.response()

    def get_kv(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        namespace, key = _field(request, "namespace"), _field(request, "key")
        value = self.routes.get_kv(namespace, key)
        if value is None:
            return request.response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}"
            )
        return request.response(ext_fields={"value": value})

    def delete_kv(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        self.routes.delete_kv(_field(request, "namespace"), _field(request, "key"))
        return request.response()

    def kv_list(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        namespace = _field(request, "namespace")
        table = self.routes.kv_list(namespace)
        if table is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return request.response(body=orjson.dumps({"table": table}))
