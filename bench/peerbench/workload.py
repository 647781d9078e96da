"""The workload every system runs: its sizes, the run's settings, and what "skipped" means.

One home for the figures' shape: 1 KiB bodies, batches of 32, 256 acknowledgements
outstanding, consumers reading 500 at a time, the peers' loopback addresses and server
process names.  A system adapter raises ``Unavailable`` when it cannot be used here; the
parent reports it as skipped, never failed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SYSTEMS = ("quiver", "redis", "nats", "rabbitmq", "echo")
SCENARIOS = ("sync", "sync8", "batch", "catchup", "latency")
SYNC_THREADS = 8  # sync8: one-at-a-time senders at once (threads; NATS: coroutines on one loop)
# Systems that run only some scenarios: the echo ceiling is a one-at-a-time round trip.
SCENARIOS_OF = {"echo": ("sync",)}
# Systems the benchmark starts itself (no running service to look for, nothing to clean up).
SELF_STARTED = ("quiver", "echo")
BODY_BYTES = 1024
BODY = b"q" * BODY_BYTES
STAMP = struct.Struct(">q")  # a latency message's first 8 bytes: time.perf_counter_ns() at send
PAD = b"q" * (BODY_BYTES - STAMP.size)
BATCH = 32  # Quiver send_batch, redis pipeline
WINDOW = 256  # acknowledgements outstanding: Quiver send_async, NATS publish_async, RabbitMQ confirms
CONSUME_BATCH = 500  # redis COUNT, NATS fetch, RabbitMQ multiple-ack, Quiver PullConsumer poll
PREFETCH = 1000  # RabbitMQ basic_qos
QUIVER_QUEUES = 8
QUIVER_PULL_BATCH = 32  # the broker sends at most 32 per pull (maxTransferCountOnMessageInMemory)
ADDRS = {"redis": ("127.0.0.1", 6379), "nats": ("127.0.0.1", 4222), "rabbitmq": ("127.0.0.1", 5672)}
SERVER_PROCESS = {"redis": "redis-server", "nats": "nats-server", "rabbitmq": "beam.smp"}
FLUSH_MODES = ("ASYNC_FLUSH", "SYNC_FLUSH")


@dataclass
class Settings:
    """Durations and sizes of one run."""

    warmup_s: float = 0.5
    measure_s: float = 3.0
    count: int = 200_000
    latency_rate: int = 2_000
    latency_warmup_s: float = 0.5
    latency_s: float = 5.0
    max_errors: int = 100  # a scenario stops after this many failed sends

    @classmethod
    def quick(cls) -> Settings:
        return cls(warmup_s=0.2, measure_s=1.0, count=10_000, latency_warmup_s=0.3, latency_s=1.5)


class Unavailable(Exception):
    """The system cannot be used here (not running, client not installed): it is skipped."""
