"""``manage.py up`` starts the whole platform, serves the console and the API, and stops
every process it started, grandchildren included, on SIGTERM or Ctrl-C (SIGINT)."""

from __future__ import annotations

import base64
import http.cookiejar
import os
import re
import signal
import socket
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis

from tests.servers import start_up, wait_for

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def processes_of(data_dir: Path) -> list[int]:
    """Every live process whose environment names ``data_dir``: what ``up`` started, at any depth."""
    needle = f"QUIVER_DATA_DIR={data_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def get(url: str, user: str | None = None, password: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def home_page_anonymously(console: str) -> tuple[int, str]:
    """GET / without a session, not following redirects: its status and Location."""
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(console, timeout=5) as response:
            return response.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Location", "")


def home_page_signed_in(console: str, user: str, password: str) -> tuple[int, bytes]:
    """Sign in through the console's login form (a session, as a browser does), then GET /."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(console + "login/", timeout=5) as response:
        form = response.read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    fields = {"username": user, "password": password, "csrfmiddlewaretoken": csrf, "next": "/"}
    with opener.open(console + "login/", urllib.parse.urlencode(fields).encode(), timeout=5) as response:
        return response.status, response.read()  # the login redirects to / on success


def worker_niceness(data_dir: Path) -> dict[str, set[tuple[int, int | None]]]:
    """The CPU niceness of each Celery worker process of the platform in ``data_dir``, by
    queue: the process's own, and its scheduler autogroup's (None without autogroups)."""
    found: dict[str, set[tuple[int, int | None]]] = {}
    for pid in processes_of(data_dir):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
            autogroup = Path(f"/proc/{pid}/autogroup")  # "/autogroup-N nice K"
            group = autogroup.read_text().split() if autogroup.exists() else []
        except OSError:
            continue
        if b"celery" in b" ".join(argv) and b"-Q" in argv:
            queue = argv[argv.index(b"-Q") + 1].decode()
            nice = int(stat.rsplit(")", 1)[1].split()[16])
            found.setdefault(queue, set()).add((nice, int(group[-1]) if group else None))
    return found


@pytest.fixture
def platform_dir(tmp_path: Path) -> Iterator[Path]:
    data_dir = tmp_path / "var"
    yield data_dir
    for pid in processes_of(data_dir):  # a failed test must not leave the platform running
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_up_starts_everything_serves_the_console_and_stops_it_all(
    platform_dir: Path, stop: signal.Signals
) -> None:
    up, ports, out = start_up(platform_dir, REPO)
    try:
        wait_for(lambda: "REST API:" in out.read_text() or up.poll() is not None, 120, "the platform summary")
        text = out.read_text()
        assert up.poll() is None, text
        password = re.search(r"created superuser 'admin' with password (\S+)", text).group(1)
        names = (
            "redis",
            "store-check",
            "namesrv",
            "broker",
            "celery-maintenance",
            "celery-long",
            "celery-reports",
            "celery-beat",
        )
        for name in (*names, "console"):
            assert re.search(rf"^  {name}\s+(up|running|exited 0)\b", text, re.M), (name, text)
        console = f"http://127.0.0.1:{ports['console']}/"
        assert get(console + "healthz")[0] == 200
        status, page = get(console + "login/")
        assert status == 200 and b"Sign in" in page  # the console page, behind its login
        assert get(console + "api/maintenance/jobs/")[0] == 403  # the API wants a login
        # The home page sends a stranger to the login; the admin, signed in, sees it.
        assert home_page_anonymously(console) == (302, "/login/?next=/")
        status, page = home_page_signed_in(console, "admin", password)
        assert status == 200 and b"<h1>Quiver</h1>" in page and b"/clusters/default/" in page, page[:2000]
        # Beat, worker and broker at work: the delay scan has run on the platform's broker.
        broker = f"127.0.0.1:{ports['broker']}"

        def scanned() -> bool:
            status, body = get(console + "api/maintenance/jobs/", "admin", password)
            jobs = {job["job"]: job for job in orjson.loads(body)["jobs"]} if status == 200 else {}
            runs = jobs.get("delay_scan", {}).get("brokers", [])
            return any(run["broker_addr"] == broker and run["status"] == "ok" for run in runs)

        wait_for(scanned, 60, "a delay scan of the platform's broker")

        # The broker's own view: the platform drives its delay scan (the broker stands by).
        def platform_drives() -> bool:
            status, body = get(console + "api/maintenance/jobs/", "admin", password)
            rows = orjson.loads(body)["brokers"] if status == 200 else []
            return any(
                row["brokerAddr"] == broker
                and row["mode"] == "auto"
                and row["jobs"]["delay_scan"]["driver"] == "platform"
                for row in rows
            )

        wait_for(platform_drives, 60, "the platform driving the broker's delay scan")
        # Long work yields the CPU: the long worker runs niced, the maintenance worker does not.
        autogroups = Path("/proc/self/autogroup").exists()
        assert worker_niceness(platform_dir) == {
            "long": {(10, 10 if autogroups else None)},
            "reports": {(10, 10 if autogroups else None)},
            "maintenance": {(0, 0 if autogroups else None)},
        }

        assert redis.Redis(port=ports["redis"]).ping()
        for port in (ports["namesrv"], ports["broker"]):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert (platform_dir / "log" / "broker.log").exists() and (platform_dir / "broker.conf").exists()
        assert len(processes_of(platform_dir)) >= 7
    finally:
        if up.poll() is None:
            up.send_signal(stop)
    assert up.wait(60) == 0, out.read_text()[-3000:]
    assert "stopped" in out.read_text()
    # Nothing it started is left: not a child, not a grandchild (the worker's pool, daphne's...).
    wait_for(lambda: not processes_of(platform_dir), 15, "every platform process to exit")
