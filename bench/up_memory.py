"""Memory of the whole ``manage.py up`` platform: at rest, and while a Spark report runs.

    .venv/bin/python bench/up_memory.py [--rest-seconds 20] [--keep DIR]

Starts ``manage.py up`` with its defaults (private Redis, free ports, a fresh data
directory) and asks its console for a traffic and a lag report, as an operator would
(beat's hourly reports cover periods the platform watched, so a fresh one has none yet).
Every half second it sums, over every process under ``up`` (its children at any depth:
the workers' pools, Redis, Spark's JVM and its Python workers), the proportional
set size (PSS: shared pages split between the processes that share them) from
/proc/<pid>/smaps_rollup, split into anonymous memory (the processes' own heaps: what
the machine must have) and file-backed pages (mapped files in the page cache, chiefly the
broker's pre-touched 1 GiB commit-log segment: reclaimable, shared with the cache), by
process.  It reports the peak while a ``spark_reports`` process is alive, and the figure
once the reports are done and the platform has rested ``--rest-seconds``.  Ends with one
JSON line.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import signal
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.servers import start_up  # noqa: E402


def descendants(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def pss_kib(pid: int) -> tuple[int, int]:
    """(anonymous, file-backed) PSS of ``pid`` in KiB."""
    anon = file = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss_Anon:"):
                anon = int(line.split()[1])
            elif line.startswith("Pss_File:"):
                file = int(line.split()[1])
    except OSError:
        pass
    return anon, file


def role(pid: int) -> str:
    """A short name for what the process is."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    if not argv[0]:  # a zombie, or a kernel thread
        return "gone"
    text = b" ".join(argv).decode(errors="replace")
    if argv[0].decode(errors="replace").endswith("java"):
        return "spark (jvm)"
    if "spark_reports" in text or "pyspark" in text:
        return "spark (python)"
    if "-Q" in text.split():
        return "celery worker " + argv[argv.index(b"-Q") + 1].decode()
    for name in ("beat", "daphne", "redis-server", "namesrv", "broker", "manage.py"):
        if name in text:
            return name
    return argv[0].decode(errors="replace").rsplit("/", 1)[-1]


def sample(root: int) -> tuple[dict[str, tuple[int, int]], bool]:
    """(anonymous, file-backed) PSS by process role under ``root``, and whether Spark runs."""
    by_role: dict[str, tuple[int, int]] = {}
    spark = False
    for pid in descendants(root):
        name = role(pid)
        if name == "gone":
            continue
        spark = spark or name.startswith("spark")
        anon, file = pss_kib(pid)
        before = by_role.get(name, (0, 0))
        by_role[name] = (before[0] + anon, before[1] + file)
    return by_role, spark


def total(by_role: dict[str, tuple[int, int]]) -> tuple[int, int]:
    return sum(a for a, _ in by_role.values()), sum(f for _, f in by_role.values())


def ask_for_reports(up_output: str, console_port: int) -> None:
    """Ask the console for a traffic and a lag report of the last hour, as an operator does
    (the reports worker runs them one after the other)."""
    password = re.search(r"created superuser 'admin' with password (\S+)", up_output)
    if password is None:
        raise SystemExit("up printed no admin password (not a fresh data directory?)")
    token = base64.b64encode(f"admin:{password.group(1)}".encode()).decode()
    for kind in ("traffic", "lag"):
        request = urllib.request.Request(
            f"http://127.0.0.1:{console_port}/api/clusters/default/reports/",
            data=json.dumps({"kind": kind, "lastMinutes": 60}).encode(),
            headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 202, response.status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rest-seconds", type=float, default=20.0)
    parser.add_argument("--keep", type=Path)
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="quiver-mem-"))
    data_dir = work / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    up, ports, out = start_up(data_dir, REPO)
    try:
        deadline = time.monotonic() + 180
        while "REST API:" not in out.read_text():
            if up.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("up did not start:\n" + out.read_text()[-3000:])
            time.sleep(0.5)
        ask_for_reports(out.read_text(), ports["console"])
        peak_roles: dict[str, tuple[int, int]] = {}
        spark_seen, idle_since = False, None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            roles, spark = sample(up.pid)
            if spark:
                spark_seen, idle_since = True, None
                if sum(total(roles)) > sum(total(peak_roles)):
                    peak_roles = roles
            elif spark_seen:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since >= args.rest_seconds:
                    break
            time.sleep(0.5)
        rest_roles, _ = sample(up.pid)
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(60)
    mib = lambda kib: round(kib / 1024, 1)  # noqa: E731
    print(f"spark report seen: {spark_seen}")
    result: dict[str, object] = {"spark_seen": spark_seen}
    for label, key, roles in (
        ("during a report (peak)", "report", peak_roles),
        ("at rest", "rest", rest_roles),
    ):
        anon, file = total(roles)
        print(f"{label}: {mib(anon)} MiB anonymous + {mib(file)} MiB file-backed (page cache)")
        for name, (a, f) in sorted(roles.items(), key=lambda item: -item[1][0]):
            print(f"  {name:28} {mib(a):8} MiB anonymous {mib(f):8} MiB file-backed")
        result[f"{key}_anon_mib"], result[f"{key}_file_mib"] = mib(anon), mib(file)
        result[f"{key}_anon_by_process_mib"] = {name: mib(a) for name, (a, _f) in roles.items()}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
