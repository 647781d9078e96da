"""Handing a failed message back for redelivery, or on to the dead-letter queue.

A push consumer whose listener refuses a message does not keep it: RocketMQ's client asks
the message's broker to re-store it (CONSUMER_SEND_MSG_BACK), and when the broker cannot
be asked or refuses, sends a copy itself to ``%RETRY%<group>`` through the client
instance's inner producer (``CLIENT_INNER_PRODUCER``).  The copy carries what the broker
would have set: the reconsume count and the consumer's maximum (lifted into the send
header by the producer), the original topic (``RETRY_TOPIC``), the first message id
(``ORIGIN_MESSAGE_ID``) and delay level 3 + reconsume times.  A broker stores such a copy
in ``%DLQ%<group>`` instead once its reconsume count reaches the maximum: the orderly
consumer relies on that to give up on a message (it sends the copy with the count already
at the maximum).

``max_reconsume_times`` is RocketMQ's consumer setting: -1 means the default, which is
16 for concurrent consumption and unbounded (Java's ``Integer.MAX_VALUE``) for orderly.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker_core.client.message import Message
from broker_core.errors import BrokerCoreError
from broker_core.model.message import (
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
)
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.errors import RemotingError
from broker_core.topics import retry_topic

if TYPE_CHECKING:
    from broker_core.client.instance import ClientInstance

log = logging.getLogger(__name__)

# RocketMQ's defaults for maxReconsumeTimes = -1 (DefaultMQPushConsumerImpl and
# ConsumeMessageOrderlyService.getMaxReconsumeTimes).
DEFAULT_MAX_RECONSUME_TIMES = 16
ORDERLY_MAX_RECONSUME_TIMES = 2**31 - 1  # Java's Integer.MAX_VALUE: retried in place for ever
# The broker's first redelivery level: 3 + reconsume times (10 s, 30 s, 1 m... by default).
RETRY_DELAY_LEVEL_BASE = 3
SEND_BACK_TIMEOUT_S = 5.0  # as Java's consumerSendMessageBack


def effective_max_reconsume_times(setting: int, *, orderly: bool) -> int:
    """The maximum a consumer set with ``maxReconsumeTimes = setting`` applies."""
    if setting != -1:
        return setting
    return ORDERLY_MAX_RECONSUME_TIMES if orderly else DEFAULT_MAX_RECONSUME_TIMES


def retry_message(msg: MessageExt, group: str, reconsume_times: int, max_reconsume_times: int) -> Message:
    """The copy of ``msg`` a consumer of ``group`` sends straight to ``%RETRY%<group>``.

    ``msg`` is as the listener saw it (body inflated, topic the original one).  Its
    properties go along, minus the transaction mark (the copy is no half message).
    """
    props = {k: v for k, v in msg.properties.items() if k != PROPERTY_TRANSACTION_PREPARED}
    # Java's msg.getMsgId() on a consumed message is its client id when it has one.
    first_id = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
    props[PROPERTY_ORIGIN_MESSAGE_ID] = props.get(PROPERTY_ORIGIN_MESSAGE_ID) or first_id
    props[PROPERTY_RETRY_TOPIC] = msg.topic
    props[PROPERTY_RECONSUME_TIME] = str(reconsume_times)
    props[PROPERTY_MAX_RECONSUME_TIMES] = str(max_reconsume_times)
    return Message(
        retry_topic(group),
        msg.body,
        delay_level=RETRY_DELAY_LEVEL_BASE + msg.reconsume_times,
        properties=props,
        flag=msg.flag,
    )


async def send_back(instance: ClientInstance, msg: MessageExt, group: str, max_reconsume_times: int) -> bool:
    """Have ``msg`` redelivered to ``group`` later; False when neither way worked.

    First CONSUMER_SEND_MSG_BACK to the broker that stores it; failing that, a copy with
    reconsume times + 1 sent to the retry topic by the inner producer (RocketMQ's
    ``DefaultMQPushConsumerImpl.sendMessageBack``).  Runs on the instance's loop.
    """
    problem = await _ask_broker(instance, msg, group, max_reconsume_times)
    if problem is None:
        return True
    log.warning(
        "consumer %s: send-back of %s failed (%s); sending it to the retry topic", group, msg.msg_id, problem
    )
    copy = retry_message(msg, group, msg.reconsume_times + 1, max_reconsume_times)
    try:
        await asyncio.wrap_future(instance.inner_producer().send_async(copy))
    except (BrokerCoreError, TimeoutError) as exc:
        log.warning("consumer %s: %s could not be sent to the retry topic either: %s", group, msg.msg_id, exc)
        return False
    return True


def send_to_dead_letter(
    instance: ClientInstance, msg: MessageExt, group: str, max_reconsume_times: int
) -> bool:
    """Send ``msg``, whose reconsume count reached the maximum, towards ``%DLQ%<group>``.

    The copy goes to the retry topic with the count at the maximum, which makes the
    broker store it in the DLQ (RocketMQ's ``ConsumeMessageOrderlyService.sendMessageBack``).
    Blocking: for a consume thread, never the loop's.  False when the send failed.
    """
    copy = retry_message(msg, group, msg.reconsume_times, max_reconsume_times)
    try:
        instance.inner_producer().send(copy)
    except (BrokerCoreError, TimeoutError) as exc:
        log.warning("consumer %s: %s could not be sent to the dead-letter queue: %s", group, msg.msg_id, exc)
        return False
    return True


async def _ask_broker(
    instance: ClientInstance, msg: MessageExt, group: str, max_reconsume_times: int
) -> str | None:
    """CONSUMER_SEND_MSG_BACK to the master of the broker that stores ``msg``; why it
    failed, or None when the broker took it."""
    addr = _master_of_store_host(instance, msg.store_host)
    fields = {
        "offset": str(msg.commit_log_offset),
        "group": group,
        "delayLevel": "0",  # the broker picks 3 + reconsume times
        "originMsgId": msg.msg_id,
        "originTopic": msg.topic,
        "unitMode": "false",
        "maxReconsumeTimes": str(max_reconsume_times),
    }
    request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields)
    try:
        response = await instance.invoke(addr, request, SEND_BACK_TIMEOUT_S)
    except RemotingError as exc:
        return str(exc)
    if response.code != ResponseCode.SUCCESS:
        return f"{addr} answered {response.code} {response.remark or ''}".rstrip()
    return None


def _master_of_store_host(instance: ClientInstance, store_host: str) -> str:
    """The master of the broker whose address is ``store_host`` (a slave's records name
    the slave), else ``store_host`` itself."""
    for route in list(instance.routes.values()):
        for broker in route.broker_datas:
            if store_host in broker.addrs.values():
                return broker.master_addr or store_host
    return store_host
