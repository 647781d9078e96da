"""CONSUMER_SEND_MSG_BACK (36): a consumer gives a message back after failing to consume it.

The message is re-stored in ``%RETRY%<group>`` with delay level 3 + reconsume times (or the
level asked for), so it comes back after 10 s, 30 s, 1 min, ...; once it has been retried
the group's ``retryMaxTimes`` (16) it goes to ``%DLQ%<group>`` instead, where no consumer
subscribes and the console resends from.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Any

from broker_core.broker.groups import group_not_exist_remark
from broker_core.broker.retry import ensure_send_back_topic, max_reconsume_times, send_back_properties
from broker_core.model.message import PROPERTY_DELAY_TIME_LEVEL, MessageInner
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.topics import dlq_topic, retry_topic

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController

log = logging.getLogger(__name__)


class SendBackProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def handle(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        fields = request.ext_fields
        group = fields.get("group", "")
        try:
            phys = int(fields.get("offset") or -1)
            delay_level = int(fields.get("delayLevel") or 0)
            max_times_override = int(fields["maxReconsumeTimes"]) if fields.get("maxReconsumeTimes") else None
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"malformed send-back header: {exc}")
        config = self.broker.groups.find(group, auto_create=self.broker.config.auto_create_subscription_group)
        if config is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, group_not_exist_remark(group))
        if config.retry_queue_nums <= 0:
            return request.response()
        store = self.broker.store
        assert store is not None
        original = store.look_message_by_offset(phys)
        if original is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {phys}")
        props = send_back_properties(original)
        max_times = max_reconsume_times(config, max_times_override)
        if original.reconsume_times >= max_times or delay_level < 0:
            topic, queue_id = dlq_topic(group), 0
            ensure_send_back_topic(self.broker, topic)
            log.info(
                "message %s of group %s goes to %s after %d tries",
                original.msg_id,
                group,
                topic,
                original.reconsume_times,
            )
        else:
            topic = retry_topic(group)
            ensure_send_back_topic(self.broker, topic, queues=config.retry_queue_nums)
            queue_id = random.randrange(max(1, config.retry_queue_nums))
            props[PROPERTY_DELAY_TIME_LEVEL] = str(
                delay_level if delay_level > 0 else 3 + original.reconsume_times
            )
        msg = MessageInner(
            topic,
            queue_id,
            original.body,
            props,
            flag=original.flag,
            sys_flag=original.sys_flag,
            born_timestamp=original.born_timestamp,
            born_host=original.born_host,
            reconsume_times=original.reconsume_times + 1,
        )
        result = await store.put_message_async(msg)
        if not result.ok:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"re-storing the message failed: {result.remark}"
            )
        return request.response()
