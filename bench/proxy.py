"""RocketMQ 5 clients through the gRPC proxy, beside our remoting client, in one run.

    python bench/proxy.py [--seconds S]

(Not ``bench/grpc.py``, the name issue 18 gives it: run from bench/, that file would stand
in for the ``grpc`` package for every script there.)

A nameserver, a broker (ASYNC_FLUSH, default settings) and the proxy each run as their own
``python -m broker_core`` process.  Measured side by side on one topic (8 queues, 1 KiB
bodies with a tag and keys):

* sync sends from one thread with the official ``rocketmq-python-client`` (5.1.2, in
  .venv-v5, which setup makes) through the proxy: msgs/s and latency p50/p99;
* the same with our ``Producer`` over the remoting protocol straight to the broker.

Target (issue 18): the v5 sync send rate >= 70 % of our remoting client's.  Receive+ack
catch-up and timer lateness are the issue's other figures; the proxy does not serve pop
consumption or timer messages yet, so they are reported as not measured.  The last line is
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from servers import create_topic, percentile, settle, start_cluster, start_server  # noqa: E402

from broker_core.client.message import Message  # noqa: E402
from broker_core.client.producer.producer import Producer  # noqa: E402

TOPIC = "GrpcBench"
BODY = b"x" * 1024
V5_PYTHON = ROOT / ".venv-v5" / "bin" / "python"

V5_CHILD = r"""
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, Message, Producer
endpoints, topic, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
producer = Producer(ClientConfiguration(endpoints, Credentials()), (topic,))
producer.startup()
def message(i):
    m = Message(); m.topic = topic; m.body = b"x" * 1024; m.tag = "T"; m.keys = f"k{i}"
    return m
for i in range(200):
    producer.send(message(i))
latencies = []
started = time.perf_counter()
i = 0
while time.perf_counter() - started < seconds:
    t0 = time.perf_counter(); producer.send(message(i)); latencies.append(time.perf_counter() - t0); i += 1
elapsed = time.perf_counter() - started
producer.shutdown()
latencies.sort()
print(json.dumps({"msgs_s": round(i / elapsed), "p50_ms": round(latencies[len(latencies) // 2] * 1000, 3),
                  "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 3)}), flush=True)
"""


def ours(namesrv: str, seconds: float) -> dict[str, float]:
    producer = Producer("grpc-bench-ours", namesrv)
    producer.start()
    try:
        for i in range(200):
            producer.send(Message(TOPIC, BODY, tags="T", keys=f"k{i}"))
        latencies = []
        started = time.perf_counter()
        i = 0
        while time.perf_counter() - started < seconds:
            t0 = time.perf_counter()
            producer.send(Message(TOPIC, BODY, tags="T", keys=f"k{i}"))
            latencies.append(time.perf_counter() - t0)
            i += 1
        elapsed = time.perf_counter() - started
    finally:
        producer.shutdown()
    latencies.sort()
    return {
        "msgs_s": round(i / elapsed),
        "p50_ms": round(percentile(latencies, 0.5) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured window per figure")
    args = parser.parse_args()
    if not V5_PYTHON.exists():
        raise SystemExit(f"{V5_PYTHON} is missing: run `python3 manage.py check` once (setup makes .venv-v5)")
    work = Path(tempfile.mkdtemp(prefix="grpc-bench-"))
    namesrv, broker = start_cluster(work, [])
    servers = [namesrv, broker]
    try:
        (work / "rmq-proxy.json").write_text(json.dumps({"namesrvAddr": namesrv.addr, "grpcServerPort": 0}))
        proxy = start_server(
            [sys.executable, "-m", "broker_core", "proxy", "-c", str(work / "rmq-proxy.json")],
            "proxy",
            work / "proxy.log",
        )
        servers.append(proxy)
        create_topic(broker.addr, TOPIC, 8)
        time.sleep(1.0)  # the broker's registration carries the topic to the nameserver
        settle(broker)
        remoting = ours(namesrv.addr, args.seconds)
        settle(broker)
        done = subprocess.run(
            [str(V5_PYTHON), "-c", V5_CHILD, proxy.addr, TOPIC, str(args.seconds)],
            capture_output=True,
            text=True,
            timeout=120 + args.seconds,
            env={"HOME": str(work), "PATH": "/usr/bin:/bin"},
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            raise SystemExit(f"the v5 client failed: {done.stderr[-2000:]}")
        v5 = json.loads(lines[-1])
    finally:
        for server in reversed(servers):
            server.stop()
        shutil.rmtree(work, ignore_errors=True)  # the broker's 1 GiB segment is not kept
    ratio = round(v5["msgs_s"] / remoting["msgs_s"], 3)
    print(f"our client, remoting   sync {remoting['msgs_s']:>6,} msgs/s  p50 {remoting['p50_ms']:.3f} ms  "
          f"p99 {remoting['p99_ms']:.3f} ms")  # fmt: skip
    print(f"v5 client, gRPC proxy  sync {v5['msgs_s']:>6,} msgs/s  p50 {v5['p50_ms']:.3f} ms  "
          f"p99 {v5['p99_ms']:.3f} ms")  # fmt: skip
    print(f"v5 / remoting: {ratio:.2f} (target >= 0.70)")
    print("receive+ack catch-up, timer lateness: not measured (pop and timer messages are not served yet)")
    print(json.dumps({"bench": "proxy", "ours_remoting": remoting, "v5_proxy": v5, "v5_over_remoting": ratio,
                      "receive_ack_msgs_s": None, "timer_lateness_p99_ms": None}))  # fmt: skip


if __name__ == "__main__":
    main()
