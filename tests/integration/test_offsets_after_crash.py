"""A consumer's final commit survives a broker crash (issue 14 item 6).

A consumer that shuts down cleanly commits its offsets and unregisters; the broker writes
``consumerOffset.json`` before it answers the unregister, so a ``kill -9`` of the broker
right after loses none of them: restarted, it redelivers nothing.  Real processes: the
nameserver and the broker run from the command line (``kill -9`` needs a process), the
producer and the push consumer are ours.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from collections import Counter
from pathlib import Path

from broker_core.client.admin import AdminClient
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.model.message import MessageExt
from tests.servers import free_port, wait_for

from .conftest import cli_server

TOPIC = "CrashTopic"
GROUP = "crash-group"
COUNT = 200


class Collector:
    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        with self.lock:
            self.got.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    def bodies(self) -> Counter[bytes]:
        with self.lock:
            return Counter(self.got)


def start_consumer(namesrv: str, collector: Collector) -> PushConsumer:
    return (
        PushConsumer(GROUP, namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        .subscribe(TOPIC)
        .register_listener(collector)
        .start()
    )


def committed(broker_addr: str) -> dict[int, int]:
    async def ask() -> dict[int, int]:
        async with AdminClient(None) as admin:
            return (await admin.consumer_offsets(broker_addr)).get((TOPIC, GROUP), {})

    return asyncio.run(ask())


def test_a_clean_consumer_shutdown_then_a_broker_kill_redelivers_nothing(tmp_path: Path) -> None:
    (tmp_path / "namesrv.conf").write_text("listenPort = 0\n")
    port = free_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName = CrashCluster\nbrokerName = broker-crash\nbrokerIP1 = 127.0.0.1\n"
        f"listenPort = {port}\nstorePathRootDir = {tmp_path / 'store'}\n"
        "mappedFileSizeCommitLog = 1048576\nwarmMappedFileEnable = false\nautoCreateTopicEnable = true\n"
    )
    offsets_file = tmp_path / "store" / "config" / "consumerOffset.json"
    with cli_server("namesrv", tmp_path / "namesrv.conf", log=tmp_path / "namesrv.log") as (_ns, namesrv):
        with conf.open("a") as f:
            f.write(f"namesrvAddr = {namesrv}\n")
        with cli_server("broker", conf, log=tmp_path / "broker.log") as (broker, addr):
            producer = Producer("crash-producer", namesrv).start()
            try:
                for i in range(COUNT):
                    producer.send(Message(TOPIC, f"m-{i}".encode()))
            finally:
                producer.shutdown()
            got = Collector()
            consumer = start_consumer(namesrv, got)
            try:
                wait_for(lambda: len(got.bodies()) == COUNT, 30, "every message consumed")
            finally:
                consumer.shutdown()  # commits, then unregisters: answered once on disk
            broker.send_signal(signal.SIGKILL)
            broker.wait(10)
        # What the killed broker left on disk holds the consumer's final offsets.
        table = json.loads(offsets_file.read_text())["offsetTable"]
        assert sum(table[f"{TOPIC}@{GROUP}"].values()) == COUNT

        with cli_server("broker", conf, log=tmp_path / "broker.log") as (_broker, again):
            assert again == addr
            assert sum(committed(addr).values()) == COUNT
            # The group resumes where it stopped: only a message sent now is delivered.
            fresh = Collector()
            consumer = start_consumer(namesrv, fresh)
            try:
                producer = Producer("crash-producer", namesrv).start()
                try:
                    producer.send(Message(TOPIC, b"after-restart"))
                finally:
                    producer.shutdown()
                wait_for(lambda: fresh.bodies()[b"after-restart"], 30, "the message sent after the restart")
            finally:
                consumer.shutdown()
            assert fresh.bodies() == Counter({b"after-restart": 1}), "redelivered after the crash"
