"""Shared characters for the store tests: a tiny real store in a temp dir and a hand-moved clock.

Every test works on real files.  Sizes are tiny so that segments roll, consume-queue files
fill and index files fill within a few hundred messages:

* commit-log segments of 64 KiB, consume-queue files of 100 entries, index files of
  64 slots and 256 entries;
* the disk-space ratios are pushed out of reach (a full build disk must not make these
  tests refuse writes or expire files); tests that exercise them set them explicitly.

The recurring characters: the ``clock`` (ms, moved by hand), the ``ORDERS`` and ``AUDIT``
topics, and ``message(...)`` which builds a ``MessageInner`` the way a producer would.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.config import StoreConfig
from broker_core.model.message import MessageExt, MessageInner, decode_record
from broker_core.store.results import GetMessageStatus
from broker_core.store.store import MessageStore

REPO = Path(__file__).resolve().parents[3]

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z, a store time in ms
HOUR_MS = 3_600_000

ORDERS = "orders"
AUDIT = "audit"


class Clock:
    """A wall clock in ms that only moves when the test says so."""

    def __init__(self, ms: int = T0) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms

    def advance(self, ms: int) -> int:
        self.ms += ms
        return self.ms


def tiny_config(root: Path | str, **overrides: Any) -> StoreConfig:
    """A StoreConfig with tiny files, rooted at ``root``."""
    base: dict[str, Any] = dict(
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20 * 100,
        max_hash_slot_num=64,
        max_index_num=256,
        max_message_size=16 * 1024,
        warm_mapped_file_enable=False,
        # Out of reach unless a test sets them: the build machine's disk use must not matter.
        disk_max_used_space_ratio=100,
        disk_space_clean_forcibly_ratio=1.0,
        disk_space_warning_level_ratio=1.0,
    )
    base.update(overrides)
    return StoreConfig(str(root), **base)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def config(tmp_path: Path) -> StoreConfig:
    return tiny_config(tmp_path / "store")


@pytest.fixture
def store(config: StoreConfig, clock: Clock) -> Iterator[MessageStore]:
    """An open store on ``config`` with the hand-moved clock; closed after the test."""
    opened = MessageStore(config, clock_ms=clock).open()
    try:
        yield opened
    finally:
        opened.close()


def reopen(config: StoreConfig, clock: Clock | None = None, **kwargs: Any) -> MessageStore:
    """Open a new MessageStore on the same directory (after a close or a crash)."""
    return MessageStore(config, clock_ms=clock or Clock(), **kwargs).open()


def with_config(config: StoreConfig, **changes: Any) -> StoreConfig:
    return dataclasses.replace(config, **changes)


def message(
    topic: str = ORDERS,
    queue_id: int = 0,
    body: bytes = b"hello",
    **properties: str,
) -> MessageInner:
    """A message as a producer sends it (properties by keyword: KEYS=..., TAGS=...)."""
    return MessageInner(topic, queue_id, body, properties or None, born_host="10.1.2.3:50000")


def read_queue(store: MessageStore, topic: str, queue_id: int, start: int | None = None) -> list[MessageExt]:
    """Every record of one queue from ``start`` (default: its min offset), decoded, in order.

    Waits for the dispatcher first: consume queues follow the commit log asynchronously.
    """
    assert store.wait_dispatched(), "the dispatcher did not catch up within 5 s"
    offset = store.get_min_offset_in_queue(topic, queue_id) if start is None else start
    found: list[MessageExt] = []
    while True:
        result = store.get_message(topic, queue_id, offset, 32)
        if result.status is not GetMessageStatus.FOUND:
            return found
        for raw, queue_offset in zip(result.messages, result.queue_offsets, strict=True):
            msg = decode_record(raw)
            assert msg.queue_offset == queue_offset
            found.append(msg)
        offset = result.next_begin_offset


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def config_json(config: StoreConfig) -> str:
    """``config`` as JSON, for a subprocess to rebuild with ``StoreConfig(**json.loads(...))``."""
    return json.dumps(dataclasses.asdict(config))


def python_script(source: str) -> list[str]:
    """argv running ``source`` (dedented) with this interpreter."""
    return [sys.executable, "-c", textwrap.dedent(source)]


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["QUIVER_NO_BOOTSTRAP"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_python(source: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``source`` in a fresh interpreter with the repo importable; fail on a non-zero exit."""
    done = subprocess.run(
        python_script(source) + list(args),
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"subprocess failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


def spawn_python(source: str, *args: str) -> subprocess.Popen[str]:
    """Start ``source`` in a fresh interpreter, stdout piped line by line."""
    return subprocess.Popen(
        python_script(source) + list(args),
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
