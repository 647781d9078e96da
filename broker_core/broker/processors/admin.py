"""Admin requests on the broker's tables: topics, subscription groups and the broker's config.

UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
GET_TOPIC_CONFIG (351, RocketMQ 5: one topic), GET_TOPIC_NAME_LIST (23),
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
DELETE_SUBSCRIPTIONGROUP (207) and GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25):
what the console and the mqadmin-style CLI change and read.
Bodies are RocketMQ's JSON shapes; a bad request is answered with a remark saying what
is wrong and changes nothing.

UPDATE_AND_CREATE_TOPIC's ``attributes`` field ("+message.type=FIFO", RocketMQ 5) changes
the topic's attributes as ``broker_core.model.topicattributes`` says; without it the topic
keeps those it has.  MIXED is refused (INVALID_PARAMETER) unless ``enableMixedMessageType``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import orjson

from broker_core.config import config_properties, update_live_broker_config
from broker_core.errors import ConfigError, MessageIllegalError, StoreError
from broker_core.model.groupconfig import SubscriptionGroupConfig
from broker_core.model.messagetype import MIXED
from broker_core.model.topicattributes import (
    MESSAGE_TYPE_ATTRIBUTE,
    TopicAttributeError,
    parse_attribute_changes,
)
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import header_bool
from broker_core.topics import SYSTEM_TOPICS, is_system_topic, retry_topic

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController


class AdminProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    # -- topics ----------------------------------------------------------------------------

    def update_and_create_topic(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        fields = request.ext_fields
        topic = fields.get("topic", "")
        if topic in SYSTEM_TOPICS or is_system_topic(topic):
            return request.response(ResponseCode.SYSTEM_ERROR, f"the topic[{topic}] is a system topic")
        if topic == self.broker.config.broker_cluster_name:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"the topic[{topic}] is conflict with system reserved words."
            )
        try:
            changes = parse_attribute_changes(fields.get("attributes") or "")
        except TopicAttributeError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"cannot create topic: {exc}")
        if changes.get(MESSAGE_TYPE_ATTRIBUTE) == MIXED and not self.broker.config.enable_mixed_message_type:
            return request.response(ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported.")
        try:
            config = TopicConfig(
                topic_name=topic,
                read_queue_nums=int(fields.get("readQueueNums") or 16),
                write_queue_nums=int(fields.get("writeQueueNums") or 16),
                perm=int(fields.get("perm") or 6),
                topic_filter_type=fields.get("topicFilterType") or "SINGLE_TAG",  # type: ignore[arg-type]
                topic_sys_flag=int(fields.get("topicSysFlag") or 0),
                order=header_bool(fields.get("order")),
            )
            self.broker.topics.update_with_attributes(config, changes)
        except (ValueError, MessageIllegalError, StoreError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"cannot create topic: {exc}")
        self.broker.topics_changed()
        return request.response()

    def delete_topic(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        topic = request.ext_fields.get("topic", "")
        if not topic:
            return request.response(ResponseCode.SYSTEM_ERROR, "the request names no topic")
        if topic in SYSTEM_TOPICS or is_system_topic(topic):
            return request.response(ResponseCode.SYSTEM_ERROR, f"the topic[{topic}] is a system topic")
        self.broker.topics.delete(topic)
        store = self.broker.store
        assert store is not None
        store.delete_topic(topic)
        store.consumer_offsets.remove_topic(topic)
        self.broker.stats.forget_topic(topic)
        self.broker.topics_changed()
        return request.response()

    def all_topic_config(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """The topic table as stored (the routes may show the broker's permission instead)."""
        return request.response(body=orjson.dumps(self.broker.topics.encode()))

    def topic_config(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """One topic's config, attributes included (RocketMQ 5's GET_TOPIC_CONFIG: the body is
        its TopicConfig JSON; a topic this broker lacks is TOPIC_NOT_EXIST)."""
        topic = request.ext_fields.get("topic", "")
        config = self.broker.topics.get(topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return request.response(body=orjson.dumps(config.to_json()))

    def topic_name_list(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        return request.response(body=orjson.dumps({"topicList": sorted(self.broker.topics.all())}))

    # -- subscription groups -----------------------------------------------------------------

    def update_and_create_group(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        try:
            body = orjson.loads(request.body)
            if not isinstance(body, dict):
                raise ValueError("the body must be a SubscriptionGroupConfig JSON object")
            config = SubscriptionGroupConfig.from_json(body)
            self.broker.groups.update(config)
        except (orjson.JSONDecodeError, ValueError, MessageIllegalError, StoreError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"cannot update group: {exc}")
        return request.response()

    def all_group_config(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        return request.response(body=orjson.dumps(self.broker.groups.encode()))

    def delete_group(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """Forget a group's config; with ``removeOffset`` its offsets and retry topic go too."""
        group = request.ext_fields.get("groupName", "")
        if not group:
            return request.response(ResponseCode.SYSTEM_ERROR, "the request names no groupName")
        self.broker.groups.delete(group)
        if self.broker.pop is not None:
            self.broker.pop.forget_group(group)  # its messages in flight are nobody's now
        if header_bool(request.ext_fields.get("removeOffset")):
            store = self.broker.store
            assert store is not None
            store.consumer_offsets.remove_consumer_group(group)
            if self.broker.topics.delete(retry_topic(group)):
                store.delete_topic(retry_topic(group))
                self.broker.topics_changed()
        return request.response()

    # -- broker config -------------------------------------------------------------------------

    def broker_config(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """The running settings as ``key=value`` lines with RocketMQ's key names."""
        store_config = dataclasses.replace(self.broker.store_config, extra={})
        props = {**config_properties(self.broker.config), **config_properties(store_config)}
        props["listenPort"] = str(self.broker.port)
        text = "".join(f"{key}={value}\n" for key, value in sorted(props.items()))
        version = orjson.dumps(self.broker.topics.data_version.to_json()).decode()
        return request.response(ext_fields={"version": version}, body=text.encode("utf-8"))

    def update_broker_config(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """Apply ``key=value`` lines to the running broker (the settings read on every use).

        All or nothing; the change lasts until the broker restarts (broker.conf is the
        operator's file and is not rewritten).
        """
        try:
            text = request.body.decode("utf-8")
            props: dict[str, str] = {}
            for line in text.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    key, sep, value = line.partition("=")
                    if not sep:
                        raise ConfigError(f"expected key=value, got {line!r}")
                    props[key.strip()] = value.strip()
            new = update_live_broker_config(self.broker.config, props)
        except (UnicodeDecodeError, ConfigError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"cannot update the broker config: {exc}")
        permission_changed = new.broker_permission != self.broker.config.broker_permission
        self.broker.config = new
        self.broker.ensure_system_topics()  # TBW102 appears when auto-creation is switched on
        if permission_changed:
            # Every topic is advertised with the broker's permission: the routes must change.
            self.broker.topics.next_version()
            self.broker.topics_changed()
        return request.response()
