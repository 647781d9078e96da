"""The attempts of one send, under RocketMQ's retry rules (``sendDefaultImpl``).

The producer sends in two ways, through the client's event loop (async sends, and any
send made on that loop) and from the calling thread itself (synchronous sends); both
follow the same rules, kept here so that they cannot drift apart:

- every attempt fits in the send's timeout, counted from its start;
- a queue given by the caller, or picked by a selector, is that queue or nothing: no retry;
- otherwise the next attempt's queue comes from the fault strategy, told which broker the
  last attempt failed on;
- transport failures (connect, timeout, connection lost), a broker missing from the
  refreshed route and the broker answers in ``RETRY_CODES`` are retried; any other broker
  answer ends the send at once;
- every attempt's latency is reported to the fault strategy; a failed one isolates its
  broker, except when the broker merely left the route;
- after the last attempt the error says why: SendTimeoutError when time ran out or the
  last attempt timed out, BrokerRefusedError (with the last code) when brokers refused,
  else ClientError, each listing every attempt's failure.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from broker_core.client.message import Message
from broker_core.client.producer.faulttolerance import FaultStrategy
from broker_core.client.producer.queues import TopicPublishInfo
from broker_core.errors import BrokerRefusedError, ClientError, NoRouteError, SendTimeoutError
from broker_core.messagequeue import MessageQueue
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.errors import RemotingError, RemotingTimeoutError

log = logging.getLogger(__name__)

Selector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]

# Broker answers after which another broker may do better (RocketMQ retries these).
RETRY_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)

# What an attempt may fail with and still leave the send to the plan.
ATTEMPT_ERRORS = (RemotingError, BrokerRefusedError, NoRouteError)


class SendAttempts:
    """Iterate with ``next_target``; report each failure with ``failed``; ``error`` at the end."""

    def __init__(
        self,
        msg: Message,
        info: TopicPublishInfo,
        strategy: FaultStrategy,
        *,
        queue: MessageQueue | None,
        selector: Selector | None,
        arg: Any,
        timeout_ms: int,
        retries: int,
        begun: float | None = None,
    ) -> None:
        """``begun``: when the send started (``time.monotonic()``), if before this plan
        (the route lookup counts against the timeout too)."""
        self.msg = msg
        self.info = info
        self.strategy = strategy
        self.queue = queue
        self.selector = selector
        self.arg = arg
        self.timeout_ms = timeout_ms
        self.deadline = (time.monotonic() if begun is None else begun) + timeout_ms / 1000
        self.attempts_left = 1 + (0 if queue is not None or selector is not None else retries)
        self.started = 0.0
        self.left_s = 0.0
        self._last_broker: str | None = None
        self._problems: list[str] = []
        self._last_error: Exception | None = None
        self._out_of_time = False

    def next_target(self) -> MessageQueue | None:
        """The queue of the next attempt, or None when no attempt is left (or no time)."""
        if self.attempts_left <= 0:
            return None
        self.attempts_left -= 1
        now = time.monotonic()
        self.left_s = self.deadline - now
        if self.left_s <= 0:
            self._out_of_time = True
            return None
        self.started = now
        if self.queue is not None:
            return self.queue
        if self.selector is not None:
            return self.selector(self.info.message_queues, self.msg, self.arg)
        return self.strategy.select_one_message_queue(self.info, self._last_broker)

    def failed(self, target: MessageQueue, exc: Exception) -> None:
        """Record the failure of the attempt on ``target``; re-raise it when it ends the send."""
        elapsed_ms = int((time.monotonic() - self.started) * 1000)
        # A broker gone from the route (Java's MQClientException) is not isolated.
        self.strategy.update_fault_item(target.broker_name, elapsed_ms, not isinstance(exc, NoRouteError))
        if isinstance(exc, BrokerRefusedError) and exc.code not in RETRY_CODES:
            raise exc
        self._problems.append(f"{target}: {exc}")
        self._last_error = exc
        self._last_broker = target.broker_name
        log.info(
            "send of %s to %s failed (attempt %d): %s",
            self.msg.unique_id,
            target,
            len(self._problems),
            exc,
        )

    def error(self) -> Exception:
        """Why the send failed, after the last attempt."""
        topic = self.msg.topic
        problems = self._problems
        detail = ": " + "; ".join(problems) if problems else ""
        last = self._last_error
        if self._out_of_time or isinstance(last, RemotingTimeoutError):
            return SendTimeoutError(f"send to {topic!r} not answered within {self.timeout_ms} ms{detail}")
        if isinstance(last, BrokerRefusedError):
            return BrokerRefusedError(
                f"send to {topic!r} refused {len(problems)} time(s){detail}",
                code=last.code,
                remark=last.remark,
                addr=last.addr,
            )
        return ClientError(f"send to {topic!r} failed {len(problems)} time(s){detail}")
