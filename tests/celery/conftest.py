"""A real platform for the Celery tests: a private Redis, our nameserver, a Celery worker
and beat (child processes, as ``manage.py up`` runs them), and brokers started per test.

Nothing is mocked and nothing runs eagerly: tasks travel through Redis to the worker, which
talks to the brokers over the protocol.  Beat runs with short periods (1 s) so a test sees
scheduled runs soon; every wait polls with a generous limit and asserts no timing.
"""

from __future__ import annotations

import collections
import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from broker_core.client.consumer.push import ConsumeStatus
from broker_core.store.message import MessageExt
from broker_core.testing import cli_server
from console.maintenance.runs import RunRecord, last_runs, recent_runs
from tests.servers import free_port, wait_for

__all__ = ["Collector", "Platform", "free_port", "wait_for"]

REPO = Path(__file__).resolve().parents[2]


class Collector:
    """A push listener that keeps what it got (thread-safe: the consumer's pool calls it)."""

    def __init__(self) -> None:
        self.got: list[MessageExt] = []
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        with self.lock:
            self.got.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.got)

    def bodies(self) -> collections.Counter[bytes]:
        with self.lock:
            return collections.Counter(m.body for m in self.got)


@dataclass
class Platform:
    """The running pieces and how to reach them."""

    redis_url: str
    namesrv_addr: str
    data_dir: Path
    env: dict[str, str]
    redis: redis.Redis
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def broker_conf(self, name: str, port: int = 0, **settings: Any) -> Path:
        """Write a broker.conf for broker ``name`` (small commit-log files) and return it."""
        conf = {
            "brokerClusterName": "CeleryCluster",
            "brokerName": name,
            "brokerIP1": "127.0.0.1",
            "listenPort": port,
            "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": self.data_dir / "brokers" / name,
            "mappedFileSizeCommitLog": 256 * 1024,
            "warmMappedFileEnable": "false",
            "flushDiskType": "ASYNC_FLUSH",
            "messageDelayLevel": " ".join(["1s"] * 18),
            **settings,
        }
        path = self.data_dir / f"{name}.conf"
        path.write_text("".join(f"{key} = {value}\n" for key, value in conf.items()))
        return path

    @contextlib.contextmanager
    def broker(
        self, name: str, port: int = 0, **settings: Any
    ) -> Iterator[tuple[subprocess.Popen[str], str]]:
        """A broker registered with the platform's nameserver; yields (process, address)."""
        conf = self.broker_conf(name, port, **settings)
        with cli_server("broker", conf, log=self.data_dir / f"{name}.log") as (proc, addr):
            yield proc, addr

    def runs_of(self, job: str, addr: str) -> list[RunRecord]:
        """Recent listed runs of ``job`` on ``addr``, newest first."""
        return [r for r in recent_runs(self.redis, 500, job) if r.broker_addr == addr]

    def last_run(self, job: str, addr: str) -> RunRecord | None:
        return next((r for r in last_runs(self.redis) if r.job == job and r.broker_addr == addr), None)


def _spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(5)


@pytest.fixture(scope="module")
def platform(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    """Nameserver, Celery worker and beat on a fresh Redis database and data directory."""
    data_dir = tmp_path_factory.mktemp("platform")
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    with contextlib.ExitStack() as stack:
        ns_conf = data_dir / "namesrv.conf"
        ns_conf.write_text("listenPort = 0\n")
        _ns, namesrv_addr = stack.enter_context(cli_server("namesrv", ns_conf, log=data_dir / "namesrv.log"))
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "QUIVER_NO_BOOTSTRAP": "1",
            "QUIVER_DATA_DIR": str(data_dir),
            "REDIS_URL": redis_url,
            "QUIVER_NAMESRV_ADDR": namesrv_addr,
            "QUIVER_OFFSET_PERSIST_SECONDS": "1",
            "QUIVER_EXPIRY_CHECK_SECONDS": "1",
            "QUIVER_BROKER_TIMEOUT_SECONDS": "2",
            # No scheduled Spark reports at beat's start: a test asks for the runs it wants.
            "QUIVER_REPORT_SCHEDULE_MINUTES": "0",
        }
        migrate = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
        )
        assert migrate.returncode == 0, migrate.stderr
        celery = [sys.executable, "-m", "celery", "-A", "console"]
        worker_log = data_dir / "worker.log"
        worker = _spawn(
            [
                *celery,
                "worker",
                "-Q",
                "maintenance,long",
                "-c",
                "2",
                "-n",
                "test@%h",
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
            ],
            env,
            worker_log,
        )
        stack.callback(_stop, worker)
        wait_for(lambda: b"ready." in worker_log.read_bytes() or worker.poll() is not None, 60, "the worker")
        assert worker.poll() is None, worker_log.read_text()[-3000:]
        beat = _spawn(
            [*celery, "beat", "--loglevel", "INFO", "--schedule", str(data_dir / "beat-schedule")],
            env,
            data_dir / "beat.log",
        )
        stack.callback(_stop, beat)
        yield Platform(redis_url, namesrv_addr, data_dir, env, client)
