"""Fixtures shared by every test layer; each layer keeps its own in its directory."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.servers import free_port, redis_binary, wait_for

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """Return the repository's root directory."""
    return REPO


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private redis-server on a free port: the tests never touch the machine's Redis."""
    directory = tmp_path_factory.mktemp("redis")
    port = free_port()
    argv = [redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(
        [*argv, "--dir", str(directory)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)

    def answers() -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    try:
        wait_for(answers, 20, "the private redis-server")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def console_redis(redis_url: str, settings: Any) -> Iterator[redis.Redis]:
    """Point this process's settings and Celery app at the private Redis."""
    from console.celery import app

    settings.REDIS_URL = redis_url
    client = redis.Redis.from_url(redis_url)
    before = app.conf.broker_url, app.conf.result_backend

    def use(broker_url: str, backend: str) -> None:
        app.conf.broker_url, app.conf.result_backend = broker_url, backend
        app._pool = None  # drop pooled connections to the old URL (not app.close(): that
        # also unregisters the app, and @shared_task modules imported later then never
        # reach its registry: NotRegistered for the reports' and alerts' tasks)
        app._backend = app._get_backend()  # a result backend of the new URL

    use(redis_url, redis_url)
    yield client
    use(*before)
