"""bench/proxy.py's RocketMQ 5 side: the official ``rocketmq-python-client`` (5.1.2) through
the proxy, run in ``.venv-v5`` (the client's ``rocketmq`` package cannot share an
environment with ours).  Each mode prints one JSON line.

    .venv-v5/bin/python bench/proxy_v5.py send ENDPOINTS TOPIC SECONDS
    .venv-v5/bin/python bench/proxy_v5.py catchup ENDPOINTS TOPIC GROUP COUNT ACKS [RECEIVERS]
    .venv-v5/bin/python bench/proxy_v5.py timer ENDPOINTS TOPIC RATE SECONDS MIN_MS MAX_MS

* ``send``: sync sends of 1 KiB messages (tag, keys) from one thread, after 200 warm-up sends:
  msgs/s, latency p50/p99.
* ``catchup``: a SimpleConsumer drains a backlog of ``COUNT`` messages: ``receive(32, 60 s)``
  then the acks, ``ACKS`` one of

  - ``sync``: ``ack(message)`` one after the other (one AckMessage RPC each, as the API
    allows);
  - ``async``: acks without waiting, so they overlap each other and the next receive, and
    all are waited for at the end (at most 4,096 outstanding).  The public ``ack_async`` of
    5.1.2 cannot do it: it returns ``None``, and the ``asyncio.Future`` it makes first needs
    an event loop in the calling thread (``RuntimeError`` in any other thread).  So this
    calls the private method under it, which starts the AckMessage RPC on the client's I/O
    loop and returns that call's ``concurrent.futures.Future``: the same RPC per message;
  - ``batch``: one AckMessage RPC carrying all 32 entries of a receive (the protocol allows
    it; the client's API has no call for it, so the request goes through the client's own
    ``rpc_client``): what the proxy could do for a client that batched its acks.

  ``RECEIVERS`` threads (1 unless given) receive and ack in parallel on one consumer.
  msgs/s from the threads' start to the last ack answered; acks that failed (an exception,
  or an entry not OK) in ``ack_errors``, the three commonest reasons in ``ack_error_kinds``.
* ``timer``: timer messages (``delivery_timestamp`` = now + a delay drawn uniformly from
  MIN_MS..MAX_MS) at RATE msgs/s for SECONDS, paced by the clock, with ``send_async`` (a
  sync send cannot keep 1,000 msgs/s through the proxy); the body is ``t-<index>``.  The
  consumer is elsewhere (bench/proxy.py's); this prints what was sent, per index its
  requested time.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future, wait

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
from rocketmq.grpc_protocol import AckMessageEntry, AckMessageRequest

BODY = b"x" * 1024
BATCH = 32
INVISIBLE_S = 60
MAX_OUTSTANDING_ACKS = 4096
OK = 20000  # apache.rocketmq.v2.Code.OK


def _percentile(values: list[float], fraction: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * fraction))] if values else 0.0


def _message(topic: str, i: int) -> Message:
    m = Message()
    m.topic = topic
    m.body = BODY
    m.tag = "T"
    m.keys = f"k{i}"
    return m


def send(endpoints: str, topic: str, seconds: float) -> dict[str, object]:
    producer = Producer(ClientConfiguration(endpoints, Credentials()), (topic,))
    producer.startup()
    try:
        for i in range(200):
            producer.send(_message(topic, i))
        latencies = []
        started = time.perf_counter()
        i = 0
        while time.perf_counter() - started < seconds:
            t0 = time.perf_counter()
            producer.send(_message(topic, i))
            latencies.append(time.perf_counter() - t0)
            i += 1
        elapsed = time.perf_counter() - started
    finally:
        producer.shutdown()
    return {
        "sent": i,
        "msgs_s": round(i / elapsed),
        "p50_ms": round(_percentile(latencies, 0.5) * 1000, 3),
        "p99_ms": round(_percentile(latencies, 0.99) * 1000, 3),
    }


def catchup(
    endpoints: str, topic: str, group: str, count: int, acks: str, receivers: int
) -> dict[str, object]:
    consumer = SimpleConsumer(
        ClientConfiguration(endpoints, Credentials()), group, {topic: FilterExpression("*")}, await_duration=2
    )
    consumer.startup()
    lock = threading.Lock()
    finished = threading.Event()
    state = {"received": 0, "ack_rpcs": 0, "receives": 0, "empty": 0, "errors": 0}
    every: list[Future[object]] = []  # each ack RPC's future, for the errors at the end
    outstanding: deque[Future[object]] = deque()  # those not yet waited for
    deadline = time.monotonic() + 120

    def batch_ack(msgs: list[Message]) -> Future[object]:
        request = AckMessageRequest()
        request.group.name = group
        request.topic.name = topic
        for msg in msgs:
            entry = AckMessageEntry()
            entry.message_id = msg.message_id
            entry.receipt_handle = msg.receipt_handle
            request.entries.append(entry)
        return consumer.rpc_client.ack_message_async(  # type: ignore[no-any-return]
            msgs[0].endpoints, request, metadata=consumer.sign(), timeout=10
        )

    def run() -> None:
        while time.monotonic() < deadline and not finished.is_set():
            msgs = consumer.receive(BATCH, INVISIBLE_S)
            with lock:
                state["receives"] += 1
                state["empty"] += not msgs
            if not msgs:
                continue
            backlog: list[Future[object]] = []
            if acks == "sync":
                for msg in msgs:
                    try:
                        consumer.ack(msg)
                    except Exception:  # noqa: BLE001
                        with lock:
                            state["errors"] += 1
                futures: list[Future[object]] = []
            elif acks == "async":
                # ack_async's own future cannot be waited for (see above): the RPC's can.
                futures = [consumer._Consumer__ack(msg) for msg in msgs]  # noqa: SLF001
            else:
                futures = [batch_ack(msgs)]
            with lock:
                every.extend(futures)
                outstanding.extend(futures)
                state["ack_rpcs"] += len(futures) if futures else len(msgs)
                state["received"] += len(msgs)
                while len(outstanding) > MAX_OUTSTANDING_ACKS:
                    backlog.append(outstanding.popleft())
                if state["received"] >= count:
                    finished.set()
            wait(backlog)

    threads = [threading.Thread(target=run, daemon=True) for _ in range(receivers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    finished.wait(max(deadline - time.monotonic(), 0))
    with lock:
        pending = list(outstanding)
        outstanding.clear()
    wait(pending)
    elapsed = time.perf_counter() - started
    for t in threads:
        t.join()  # one may still be in a long poll that finds nothing
    kinds: Counter[str] = Counter()  # what went wrong, by exception or status
    for future in every:
        try:
            result = future.result()
        except Exception as exc:  # noqa: BLE001
            kinds[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
            continue
        # an answer whose entries are not all OK counts each entry refused
        for e in result.entries:  # type: ignore[attr-defined]
            if e.status.code != OK:
                kinds[f"{e.status.code}: {e.status.message[:120]}"] += 1
    state["errors"] += sum(kinds.values())
    consumer.shutdown()
    return {
        "acks": acks,
        "receivers": receivers,
        "received": state["received"],
        "receives": state["receives"],
        "empty_receives": state["empty"],
        "ack_rpcs": state["ack_rpcs"],
        "ack_errors": state["errors"],
        "ack_error_kinds": dict(kinds.most_common(3)),
        "seconds": round(elapsed, 3),
        "msgs_s": round(state["received"] / elapsed),
    }


def timer(
    endpoints: str, topic: str, rate: int, seconds: float, min_ms: int, max_ms: int
) -> dict[str, object]:
    producer = Producer(ClientConfiguration(endpoints, Credentials()), (topic,))
    producer.startup()
    rng = random.Random(7)
    total = int(rate * seconds)
    futures: list[Future[object]] = []
    requested: list[int] = []
    try:
        warm = Message()
        warm.topic, warm.body, warm.delivery_timestamp = topic, b"warm-up", int(time.time() * 1000) + 100
        producer.send(warm)
        start = time.perf_counter()
        for i in range(total):
            ahead = start + i / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
            m = Message()
            m.topic = topic
            m.body = f"t-{i}".encode()
            at = int(time.time() * 1000 + min_ms + rng.random() * (max_ms - min_ms))
            m.delivery_timestamp = at
            requested.append(at)
            futures.append(producer.send_async(m))
        send_seconds = time.perf_counter() - start
        wait(futures, timeout=60)
        errors = sum(1 for f in futures if not f.done() or f.exception() is not None)
    finally:
        producer.shutdown()
    return {
        "sent": total - errors,
        "send_errors": errors,
        "send_rate": round(total / send_seconds, 1),
        "requested_ms": requested,
    }


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "send":
        out = send(args[0], args[1], float(args[2]))
    elif mode == "catchup":
        receivers = int(args[5]) if len(args) > 5 else 1
        out = catchup(args[0], args[1], args[2], int(args[3]), args[4], receivers)
    elif mode == "timer":
        out = timer(args[0], args[1], int(args[2]), float(args[3]), int(args[4]), int(args[5]))
    else:
        raise SystemExit(f"unknown mode {mode!r}: send, catchup or timer")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
