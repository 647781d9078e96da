"""A real platform for the Celery tests: a private Redis, our nameserver, the Celery workers
and beat (child processes, as ``manage.py up`` runs them, with its default schedule: the
Spark reports too), and brokers started per test.

Nothing is mocked and nothing runs eagerly: tasks travel through Redis to the worker, which
talks to the brokers over the protocol.  Beat runs with short periods (1 s) so a test sees
scheduled runs soon; every wait polls with a generous limit and asserts no timing.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import http.cookiejar
import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from broker_core.client.admin import AdminClient
from broker_core.client.adminmodels import MaintenanceStatus
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.model.message import MessageExt
from broker_core.testing import cli_server
from console.core.processes import celery_workers
from console.core.supervisor import child_preexec
from console.maintenance.runs import RunRecord, last_runs, recent_runs
from tests.servers import free_port, routed, wait_for

__all__ = ["Collector", "Console", "Platform", "free_port", "wait_for"]

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
    # The Celery workers by name (celery-maintenance, celery-long), as ``up`` names them.
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

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

    def consumer(self, group: str, topic: str, listener: Any) -> PushConsumer:
        """A started push consumer of ``topic`` reading from the first offset, once the
        nameserver routes ``topic``: a broker registers a topic that a send just created at
        its next registration, a moment later, and a consumer refuses a topic with no route."""
        wait_for(lambda: routed(self.namesrv_addr, topic), 30, f"the nameserver's route to {topic}")
        return (
            PushConsumer(group, self.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            .subscribe(topic)
            .register_listener(listener)
            .start()
        )

    def maintenance_status(self, addr: str) -> MaintenanceStatus:
        """Who drives each maintenance job on the broker at ``addr``, as the broker says."""

        async def ask() -> MaintenanceStatus:
            async with AdminClient(None) as admin:
                return await admin.maintenance_status(addr)

        return asyncio.run(ask())

    def drives(self, addr: str, job: str = "delay_scan") -> bool:
        """Whether the platform drives ``job`` on the broker now (its last run was ours)."""
        state = self.maintenance_status(addr).jobs[job]
        return (
            state.driver == "platform" and state.last_run is not None and state.last_run.runner == "platform"
        )

    def runs_of(self, job: str, addr: str) -> list[RunRecord]:
        """Recent listed runs of ``job`` on ``addr``, newest first."""
        return [r for r in recent_runs(self.redis, 500, job) if r.broker_addr == addr]

    def last_run(self, job: str, addr: str) -> RunRecord | None:
        return next((r for r in last_runs(self.redis) if r.job == job and r.broker_addr == addr), None)


def _spawn(argv: list[str], env: dict[str, str], log: Path, nice: int = 0) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=child_preexec(os.getpid(), nice=nice),  # as ``up`` starts its children
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
        workers = {}
        # The workers ``manage.py up`` runs: one for maintenance, one (niced) for long work.
        for spec in celery_workers(data_dir, long_nice=10):
            log = data_dir / f"{spec.name}.log"
            worker = _spawn([*spec.argv, "--without-gossip", "--without-mingle"], env, log, spec.nice)
            stack.callback(_stop, worker)
            wait_for(
                lambda log=log, w=worker: b"ready." in log.read_bytes() or w.poll() is not None, 60, spec.name
            )
            assert worker.poll() is None, log.read_text()[-3000:]
            workers[spec.name] = worker
        beat = _spawn(
            [*celery, "beat", "--loglevel", "INFO", "--schedule", str(data_dir / "beat-schedule")],
            env,
            data_dir / "beat.log",
        )
        stack.callback(_stop, beat)
        yield Platform(redis_url, namesrv_addr, data_dir, env, client, workers=workers)


PASSWORD = "pw-admin-report-123"


class Console:
    """The console at ``url``: REST calls with basic auth, pages with a signed-in session."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.token = base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
        self.browser = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Basic {self.token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def sign_in(self) -> None:
        with self.browser.open(self.url + "/login/", timeout=10) as response:
            form = response.read().decode()
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
        fields = {"csrfmiddlewaretoken": csrf, "username": "admin", "password": PASSWORD}
        request = urllib.request.Request(
            self.url + "/login/", data=urllib.parse.urlencode(fields).encode(), method="POST"
        )
        request.add_header("Referer", self.url + "/login/")
        self.browser.open(request, timeout=10).close()

    def page(self, path: str) -> str:
        with self.browser.open(self.url + path, timeout=30) as response:
            return response.read().decode()


@pytest.fixture
def console(platform: Platform) -> Iterator[Console]:
    """daphne serving the console on the platform's database and Redis, with an admin."""
    env = {**platform.env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD}
    made = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "createsuperuser",
            "--noinput",
            "--username",
            "admin",
            "--email",
            "admin@example.com",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0 or "already taken" in made.stderr, made.stderr
    port = free_port()
    log = platform.data_dir / "console.log"
    server = _spawn(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "console.asgi:application"],
        platform.env,
        log,
    )
    console = Console(f"http://127.0.0.1:{port}")

    def up() -> bool:
        try:
            urllib.request.urlopen(console.url + "/login/", timeout=2).close()
            return True
        except OSError:
            return server.poll() is not None

    try:
        wait_for(up, 60, "the console")
        assert server.poll() is None, log.read_text()[-3000:]
        yield console
    finally:
        _stop(server)
