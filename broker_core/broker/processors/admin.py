"""Admin requests: topic creation and deletion (the console and mqadmin-style tools)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker_core.broker.topics import TopicConfig
from broker_core.errors import MessageIllegalError
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController


class AdminProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def update_and_create_topic(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        fields = request.ext_fields
        try:
            config = TopicConfig(
                topic_name=fields.get("topic", ""),
                read_queue_nums=int(fields.get("readQueueNums") or 16),
                write_queue_nums=int(fields.get("writeQueueNums") or 16),
                perm=int(fields.get("perm") or 6),
                topic_filter_type=fields.get("topicFilterType") or "SINGLE_TAG",  # type: ignore[arg-type]
                topic_sys_flag=int(fields.get("topicSysFlag") or 0),
                order=(fields.get("order") or "").lower() in ("true", "1"),
            )
            self.broker.topics.update(config)
        except (ValueError, MessageIllegalError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"cannot create topic: {exc}")
        self.broker.topics_changed()
        return request.response()

    def delete_topic(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        topic = request.ext_fields.get("topic", "")
        if not topic:
            return request.response(ResponseCode.SYSTEM_ERROR, "the request names no topic")
        self.broker.topics.delete(topic)
        assert self.broker.store is not None
        self.broker.store.delete_topic(topic)
        self.broker.topics_changed()
        return request.response()
