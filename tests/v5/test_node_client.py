"""The official RocketMQ 5 Node.js client (npm ``rocketmq-client-nodejs`` 1.0.8, which setup
installs into .node-v5) through ``broker_core.proxy``: what its producer sends (normal,
tagged, keyed, with properties; FIFO by message group) a 4.x consumer (ours) reads as sent,
and its SimpleConsumer and PushConsumer receive what a 4.x producer (ours) sent, filtered by
tag, acked once, delivered again when not acked or not consumed.

One nameserver, broker and proxy (child processes, as ``python -m broker_core`` runs them)
serve the module; each test has its own topics and groups.  The Node client runs as a child
(tests/v5/node/client_child.cjs) that prints a JSON line per event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker_core.client.admin import AdminClient
from broker_core.client.config import ClientConfig
from broker_core.client.consumer.pull import PullConsumer, PullStatus
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.errors import AdminError
from broker_core.model.message import MessageExt
from broker_core.model.topicconfig import TopicConfig
from broker_core.testing import cli_server

REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO / ".node-v5" / "node_modules"
CLIENT = ("rocketmq-client-nodejs", "1.0.8")
CHILD = Path(__file__).parent / "node" / "client_child.cjs"
CLUSTER = "NodeCluster"
# RocketMQ's property for a FIFO message's group, as 4.x consumers see it.
MESSAGE_GROUP_PROPERTY = "__SHARDINGKEY"
# How long a received message stays invisible (RocketMQ's proxy takes 10 s at least, Quiver's any time).
INVISIBLE_MS = 2_000


def _node_client_missing() -> str | None:
    """Why the Node client cannot run here, or None when it can."""
    if shutil.which("node") is None:
        return "node is not on PATH (the RocketMQ 5 Node.js client needs Node.js >= 16.19)"
    name, version = CLIENT
    try:
        installed = json.loads((NODE_MODULES / name / "package.json").read_text()).get("version")
    except (OSError, ValueError):
        installed = None
    if installed != version:
        return f".node-v5 lacks {name} {version}: `python3 manage.py` setup installs it with npm"
    return None


MISSING = _node_client_missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=str(MISSING))


@dataclass
class Cluster:
    namesrv: str
    broker: str
    proxy: str
    work: Path

    def topic(self, name: str, queues: int, message_type: str) -> str:
        """Create ``name`` with ``queues`` queues and RocketMQ 5's ``message.type``, and wait
        until the nameserver routes it (the proxy reads routes from there)."""

        async def create() -> None:
            async with AdminClient(self.namesrv) as admin:
                await admin.create_or_update_topic(
                    TopicConfig(name, queues, queues),
                    cluster=CLUSTER,
                    attributes={"message.type": message_type},
                )
                async with asyncio.timeout(20):
                    while True:
                        with contextlib.suppress(AdminError):
                            if (await admin.topic_route(name)).queue_datas:
                                return
                        await asyncio.sleep(0.1)

        asyncio.run(create())
        return name

    def node(self, mode: str, spec: dict[str, Any], name: str) -> list[dict[str, Any]]:
        """Run the Node client in ``mode`` against the proxy; its JSON lines.  A line saying
        the client itself failed (start-up, shutdown) fails the test with its stderr."""
        home = self.work / "home" / name  # the client logs under $HOME/logs
        home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HOME": str(home), "NODE_PATH": str(NODE_MODULES)}
        try:
            done = subprocess.run(
                ["node", str(CHILD), mode],
                input=json.dumps({"endpoints": self.proxy, **spec}),
                capture_output=True, text=True, timeout=60, env=env, cwd=home,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(
                f"the Node {mode} child did not finish within 60 s: {exc.stdout!r}"
            ) from None
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        failed = [line for line in lines if line["kind"] == "error"]
        assert done.returncode == 0 and not failed, (failed, done.stderr[-3000:])
        assert lines and lines[-1]["kind"] == "done", (lines, done.stderr[-3000:])
        return lines


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A nameserver, a broker (``broker-a`` of NodeCluster) and the proxy, as child processes."""
    work = tmp_path_factory.mktemp("node-v5")
    with contextlib.ExitStack() as stack:
        (work / "namesrv.conf").write_text("listenPort = 0\n")
        _, namesrv = stack.enter_context(
            cli_server("namesrv", work / "namesrv.conf", log=work / "namesrv.log")
        )
        broker_conf = {
            "brokerClusterName": CLUSTER,
            "brokerName": "broker-a",
            "brokerIP1": "127.0.0.1",
            "listenPort": 0,
            "namesrvAddr": namesrv,
            "storePathRootDir": work / "store",
            "mappedFileSizeCommitLog": 4 * 1024 * 1024,
            "warmMappedFileEnable": "false",
        }
        (work / "broker.conf").write_text("".join(f"{k} = {v}\n" for k, v in broker_conf.items()))
        _, broker = stack.enter_context(cli_server("broker", work / "broker.conf", log=work / "broker.log"))
        proxy_conf = {"rocketMQClusterName": CLUSTER, "namesrvAddr": namesrv, "grpcServerPort": 0}
        (work / "rmq-proxy.json").write_text(json.dumps(proxy_conf))
        _, proxy = stack.enter_context(cli_server("proxy", work / "rmq-proxy.json", log=work / "proxy.log"))
        yield Cluster(namesrv, broker, proxy, work)


def pull_everything(namesrv: str, topic: str, expected: int) -> list[MessageExt]:
    """Every message of ``topic``, read by a 4.x pull consumer from each queue's start,
    once ``expected`` of them are there (the broker indexes a stored message at once, or
    nearly)."""
    got: dict[tuple[int, int], MessageExt] = {}
    with PullConsumer("NodeCheck", config=ClientConfig(namesrv_addr=namesrv)) as consumer:
        queues = consumer.fetch_queues(topic)
        next_offset = dict.fromkeys(queues, 0)
        deadline = time.monotonic() + 20
        while len(got) < expected and time.monotonic() < deadline:
            for mq in queues:
                result = consumer.pull(mq, "*", next_offset[mq])
                if result.status is PullStatus.FOUND:
                    for msg in result.messages:
                        got[msg.queue_id, msg.queue_offset] = msg
                next_offset[mq] = result.next_begin_offset
            if len(got) < expected:
                time.sleep(0.05)
    return [got[key] for key in sorted(got)]


def send_4x(namesrv: str, messages: list[Message]) -> list[str]:
    """Send with our 4.x producer; the message ids (UNIQ_KEY) in order."""
    producer = Producer("NodeFeeders", config=ClientConfig(namesrv_addr=namesrv)).start()
    try:
        return [producer.send(msg).msg_id for msg in messages]
    finally:
        producer.shutdown()


def test_node_producer_sends_arrive_at_a_4x_consumer_as_sent(cluster: Cluster) -> None:
    normal = cluster.topic("NodeNormal", 4, "NORMAL")
    fifo = cluster.topic("NodeFifo", 4, "FIFO")
    plan: list[dict[str, Any]] = [
        {
            "topic": normal,
            "body": f"node-{i}",
            "tag": "TagA" if i % 2 == 0 else "TagB",
            "keys": [f"key-{i}", f"order-{i}"],
            "properties": {"origin": "node", "index": str(i)},
        }
        for i in range(6)
    ]
    plan += [
        {
            "topic": fifo,
            "body": f"fifo-{g}-{i}",
            "tag": "Fifo",
            "keys": [f"fifo-{g}-{i}"],
            "messageGroup": f"group-{g}",
        }
        for i in range(5)
        for g in ("a", "b")
    ]
    lines = cluster.node("produce", {"messages": plan}, "producer")
    sent = {line["index"]: line for line in lines if line["kind"] == "sent"}
    assert len(sent) == len(plan), [line for line in lines if line["kind"] in ("send_error", "log")]
    by_id = {sent[i]["message_id"]: plan[i] for i in range(len(plan))}
    assert len(by_id) == len(plan)  # one id per message

    got = pull_everything(cluster.namesrv, normal, 6) + pull_everything(cluster.namesrv, fifo, 10)
    assert sorted(m.uniq_key or "" for m in got) == sorted(by_id)  # the client's ids, as UNIQ_KEY
    for msg in got:
        want = by_id[msg.uniq_key or ""]
        assert msg.topic == want["topic"] and msg.body == want["body"].encode()
        assert msg.tags == want["tag"] and msg.keys == " ".join(want["keys"])
        for key, value in want.get("properties", {}).items():
            assert msg.properties[key] == value
    groups: dict[str, list[MessageExt]] = defaultdict(list)
    for msg in got:  # pulled in (queue, offset) order
        if msg.topic == fifo:
            groups[msg.properties[MESSAGE_GROUP_PROPERTY]].append(msg)
    assert set(groups) == {"group-a", "group-b"}
    for name, msgs in groups.items():
        assert len({m.queue_id for m in msgs}) == 1, name  # one queue per message group ...
        assert [m.body.decode() for m in msgs] == [f"fifo-{name[-1]}-{i}" for i in range(5)]  # ... in order


def test_node_simple_consumer_receives_filters_and_acks(cluster: Cluster) -> None:
    """4.x sends of two tags; the SimpleConsumer subscribed to one receives only those, with
    tag, keys, properties and the producer's message id; one it leaves unacked comes back
    (delivery attempt 2) once its invisible duration is over; acked ones do not."""
    topic = cluster.topic("NodeSimple", 2, "NORMAL")
    messages = [
        Message(topic, f"simple-{i}".encode(), tags="TagA" if i % 3 else "TagB", keys=[f"key-{i}"],
                properties={"origin": "4x", "index": str(i)})
        for i in range(6)
    ]  # fmt: skip
    ids = send_4x(cluster.namesrv, messages)
    wanted = {ids[i]: messages[i] for i in range(6) if messages[i].tags == "TagA"}  # 1, 2, 4, 5
    spec = {
        "group": "NodeSimpleReaders",
        "topic": topic,
        "filter": "TagA",
        "count": len(wanted),
        "invisible_ms": INVISIBLE_MS,
        "await_ms": 2000,
        "deadline_ms": 45_000,
        "leave_unacked": ["simple-2"],
    }
    lines = cluster.node("simple", spec, "simple")
    received = [line for line in lines if line["kind"] == "message"]
    problems = [line for line in lines if line["kind"] in ("receive_error", "ack_error", "log")]
    assert lines[-1]["acked"] == len(wanted), (problems, received)
    assert all(line["message_id"] in wanted for line in received), received  # TagB filtered out
    attempts: dict[str, list[int]] = defaultdict(list)
    for line in received:
        msg = wanted[line["message_id"]]
        assert line["topic"] == topic and line["body"] == msg.body.decode()
        assert line["tag"] == "TagA" and line["keys"] == list(msg.keys or [])
        assert line["properties"].get("origin") == "4x"
        assert line["properties"].get("index") == msg.properties["index"]
        assert line["message_group"] is None and not line["corrupted"]
        attempts[line["body"]].append(line["delivery_attempt"])
    # Each acked message came once; the one left unacked came again, as attempt 2.
    assert attempts == {"simple-1": [1], "simple-2": [1, 2], "simple-4": [1], "simple-5": [1]}, received


def test_node_push_consumer_consumes_everything_and_retries_a_failure(cluster: Cluster) -> None:
    """A PushConsumer (QueryAssignment, then receive and ack per assigned queue) gets every
    message a 4.x producer sent; one its listener fails is delivered again."""
    topic = cluster.topic("NodePush", 2, "NORMAL")
    messages = [
        Message(topic, f"push-{i}".encode(), tags="TagP", keys=[f"key-{i}"], properties={"index": str(i)})
        for i in range(5)
    ]
    ids = send_4x(cluster.namesrv, messages)
    spec = {
        "group": "NodePushReaders",
        "topic": topic,
        "count": 5,
        "await_ms": 2000,
        "deadline_ms": 20_000,
        "fail_first": ["push-3"],
    }
    lines = cluster.node("push", spec, "push")
    deliveries = [line for line in lines if line["kind"] == "message"]
    assert lines[-1]["succeeded"] == 5, ([line for line in lines if line["kind"] == "log"], deliveries)
    consumed = {line["message_id"]: line for line in deliveries if line["result"] == "SUCCESS"}
    assert set(consumed) == set(ids), deliveries
    for msg_id, msg in zip(ids, messages, strict=True):
        line = consumed[msg_id]
        assert line["body"] == msg.body.decode() and line["tag"] == "TagP"
        assert (
            line["keys"] == list(msg.keys or [])
            and line["properties"].get("index") == msg.properties["index"]
        )
    retried = [line for line in deliveries if line["body"] == "push-3"]
    assert [line["result"] for line in retried] == ["FAILURE", "SUCCESS"], deliveries
    assert [line["delivery_attempt"] for line in retried] == [1, 2], deliveries
