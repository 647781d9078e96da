"""Declare the processes that make up a running Quiver platform, as ``manage.py up`` starts them.

Start order: the private Redis (when one is needed), a store check that must finish
before the broker opens the store, the nameserver, the broker, three Celery workers — one
for the time-critical maintenance jobs, one (niced) for long work such as a DLQ redrive,
one (niced) for Spark reports, so none can take another's slots — and beat, which drives
the broker's maintenance (the broker's own timers take a job over whenever beat's passes
stop reaching it), and the console.  Each child gets the same environment: the data
directory, the Redis URL, the nameserver address and the Django settings module.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from console.celery import LONG_QUEUE, MAINTENANCE_QUEUE, REPORTS_QUEUE
from console.core.supervisor import ChildSpec, http_ok, tcp_open

REPO = Path(__file__).resolve().parents[2]

# Keys ``up`` sets in the conf files on every start (they follow its settings); the other
# keys are written once, on the first start, and are the user's to edit from then on.
NAMESRV_MANAGED = ("listenPort",)
BROKER_MANAGED = ("listenPort", "namesrvAddr", "storePathRootDir")


@dataclasses.dataclass(frozen=True)
class Ports:
    """Where the platform's servers listen (all on 127.0.0.1)."""

    namesrv: int
    broker: int
    console: int
    # The gRPC proxy for RocketMQ 5 clients.
    proxy: int = 8081


def write_conf(path: Path, managed: Mapping[str, object], initial: Mapping[str, object]) -> None:
    """Write a RocketMQ-style ``key = value`` file: ``managed`` keys set to these values,
    ``initial`` keys added only when absent, every other line kept as the user left it."""
    lines = path.read_text().splitlines() if path.exists() else []
    present: set[str] = set()
    out = []
    for line in lines:
        key = line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith("#") else ""
        if key in managed:
            line = f"{key} = {managed[key]}"
        if key:
            present.add(key)
        out.append(line)
    if not lines:
        out.append("# Written by `manage.py up`; the keys it manages are rewritten at each start:")
        out.append(f"# {', '.join(managed)}.  Edit the others as you like.")
    out += [f"{k} = {v}" for k, v in {**initial, **managed}.items() if k not in present]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")


def write_server_confs(data_dir: Path, ports: Ports) -> tuple[Path, Path]:
    """The nameserver's and the broker's conf files under ``data_dir``, brought up to date."""
    namesrv_conf, broker_conf = data_dir / "namesrv.conf", data_dir / "broker.conf"
    write_conf(namesrv_conf, {"listenPort": ports.namesrv}, {})
    write_conf(
        broker_conf,
        {
            "listenPort": ports.broker,
            "namesrvAddr": f"127.0.0.1:{ports.namesrv}",
            "storePathRootDir": data_dir / "store",
        },
        {
            "brokerClusterName": "DefaultCluster",
            "brokerName": "broker-a",
            "brokerId": 0,
            "brokerIP1": "127.0.0.1",
            "autoCreateTopicEnable": "true",
        },
    )
    return namesrv_conf, broker_conf


def write_proxy_conf(data_dir: Path, ports: Ports) -> Path:
    """The proxy's ``rmq-proxy.json`` under ``data_dir``: the keys ``up`` manages set, the
    user's other keys kept."""
    path = data_dir / "rmq-proxy.json"
    try:
        current = json.loads(path.read_text()) if path.exists() else {}
    except ValueError:
        current = {}
    if not isinstance(current, dict):
        current = {}
    current.setdefault("rocketMQClusterName", "DefaultCluster")
    current.update({"namesrvAddr": f"127.0.0.1:{ports.namesrv}", "grpcServerPort": ports.proxy})
    path.write_text(json.dumps(current, indent=2) + "\n")
    return path


def broker_conf_warnings(broker_conf: Path) -> list[str]:
    """What ``up`` should tell the user about their broker.conf before starting it.

    Earlier versions of ``up`` wrote ``standaloneMaintenance = false`` into it; a broker so
    configured never takes its jobs over when the platform is silent.
    """
    from broker_core.config import load_properties

    try:
        mode = load_properties(broker_conf).get("standaloneMaintenance", "auto").strip().lower()
    except (OSError, ValueError):
        return []
    if mode != "false":
        return []
    return [
        f"warning: {broker_conf} sets standaloneMaintenance = false (earlier versions of `up` wrote it): "
        "the broker never runs its delay scan itself, so delayed messages and retries wait whenever "
        "the platform's worker is busy or down; remove the line to use the default (auto)"
    ]


def log_says(path: Path, text: str) -> bool:
    try:
        return text in path.read_text(errors="replace")
    except OSError:
        return False


def celery_workers(log_dir: Path, long_nice: int) -> list[ChildSpec]:
    """The platform's three Celery workers: time-critical maintenance, long work, and Spark
    reports (both niced).

    Each consumes its own queue only (console/celery.py routes every task to one), so a
    Spark report or a redrive can never take a slot the delay scan needs, and a report
    never holds up a redrive an operator waits for.  The maintenance worker has two slots
    (a broker's delay-scan pass beside a fan-out, the alert check or a webhook), the long
    worker two, the reports worker one: reports run one after the other, so a machine
    holds one Spark session (about 1.7 GiB) at a time.
    """
    return [
        _worker("celery-maintenance", MAINTENANCE_QUEUE, 2, log_dir),
        _worker("celery-long", LONG_QUEUE, 2, log_dir, nice=long_nice),
        _worker("celery-reports", REPORTS_QUEUE, 1, log_dir, nice=long_nice),
    ]


def _worker(name: str, queue: str, slots: int, log_dir: Path, *, nice: int = 0) -> ChildSpec:
    """A Celery worker that consumes ``queue`` only, taking one task per slot at a time
    (``-O fair``: a slot busy with a long task is never handed the next one)."""
    argv = [sys.executable, "-m", "celery", "-A", "console", "worker", "-Q", queue]
    argv += ["--concurrency", str(slots), "--prefetch-multiplier", "1", "-O", "fair"]
    argv += ["--hostname", f"{queue}@%h", "--loglevel", "INFO"]
    return ChildSpec(name, argv, health=lambda: log_says(log_dir / f"{name}.log", " ready."), nice=nice)


def platform_children(
    data_dir: Path,
    ports: Ports,
    redis_url: str,
    *,
    redis_child: ChildSpec | None = None,
    console: bool = True,
    namesrv_addr: str | None = None,
    long_nice: int = 10,
) -> list[ChildSpec]:
    """Return the children to supervise, in start order; each process is one entry.

    ``namesrv_addr`` is what the console and Celery manage (the platform's own nameserver
    unless QUIVER_NAMESRV_ADDR names other ones); ``long_nice`` the CPU niceness of the
    long-work worker (``QUIVER_LONG_WORK_NICE``).
    """
    python = sys.executable
    namesrv_conf, broker_conf = write_server_confs(data_dir, ports)
    log_dir = data_dir / "log"
    celery = [python, "-m", "celery", "-A", "console"]
    children = [redis_child] if redis_child is not None else []
    children += [
        ChildSpec(
            "store-check",
            # Recover as the broker would, record damage in the newest segments (recovery's
            # region and the one before), and log every change; a full walk is the
            # operator's ``store check`` without --tail.
            [
                python,
                "-m",
                "broker_core",
                "store",
                "check",
                "--repair",
                "--tail",
                "2",
                "--store",
                str(data_dir / "store"),
            ],
            oneshot=True,
            essential=False,
            blocking=True,
        ),
        ChildSpec(
            "namesrv",
            [python, "-m", "broker_core", "namesrv", "-c", str(namesrv_conf)],
            url=f"127.0.0.1:{ports.namesrv}",
            health=tcp_open("127.0.0.1", ports.namesrv),
        ),
        ChildSpec(
            "broker",
            [python, "-m", "broker_core", "broker", "-c", str(broker_conf)],
            url=f"127.0.0.1:{ports.broker}",
            health=tcp_open("127.0.0.1", ports.broker),
        ),
        ChildSpec(
            "proxy",
            [python, "-m", "broker_core", "proxy", "-c", str(write_proxy_conf(data_dir, ports))],
            url=f"127.0.0.1:{ports.proxy}",
            health=tcp_open("127.0.0.1", ports.proxy),
        ),
        *celery_workers(log_dir, long_nice),
        ChildSpec(
            "celery-beat",
            [*celery, "beat", "--loglevel", "INFO", "--schedule", str(data_dir / "celerybeat-schedule")],
        ),
    ]
    if console:
        console_url = f"http://127.0.0.1:{ports.console}/"
        children.append(
            ChildSpec(
                "console",
                [
                    python,
                    "-m",
                    "daphne",
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(ports.console),
                    "console.asgi:application",
                ],
                url=console_url,
                health=http_ok(console_url + "healthz"),
            )
        )
    shared_env = {
        "QUIVER_DATA_DIR": str(data_dir),
        "REDIS_URL": redis_url,
        "QUIVER_NAMESRV_ADDR": namesrv_addr or f"127.0.0.1:{ports.namesrv}",
        "DJANGO_SETTINGS_MODULE": "console.settings",
    }
    return [
        dataclasses.replace(spec, cwd=spec.cwd or REPO, env={**shared_env, **spec.env}) for spec in children
    ]
