"""The supervisor stops every child and grandchild it started, whatever ends it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Runs the supervisor in its own process, as `manage.py up` does: argv[1] is a JSON list of
# ChildSpec keyword arguments, argv[2] the log directory.
DRIVER = """
import json, sys
from pathlib import Path
from console.core.supervisor import ChildSpec, Supervisor
specs = [ChildSpec(**kwargs) for kwargs in json.loads(sys.argv[1])]
sys.exit(Supervisor(specs, Path(sys.argv[2]), stop_timeout_s=5).run())
"""

# Writes its pid to argv[1] (atomically, so a reader never sees half of it), then sleeps.
SLEEPER = """
import os, sys, time
tmp = sys.argv[1] + ".tmp"
with open(tmp, "w") as f:
    f.write(str(os.getpid()))
os.replace(tmp, sys.argv[1])
time.sleep(120)
"""

# Starts a SLEEPER grandchild, then becomes one itself.
PARENT = """
import subprocess, sys
subprocess.Popen([sys.executable, "-c", sys.argv[3], sys.argv[2]])
exec(sys.argv[3])
"""


def alive(pid: int) -> bool:
    """Tell whether ``pid`` is a live process; a zombie counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Wait until ``condition()`` holds, failing the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s}s waiting for {condition}")
        time.sleep(0.05)


def read_pids(*paths: Path) -> list[int]:
    """Wait for every pid file to appear and return the pids they hold."""
    wait_for(lambda: all(p.exists() for p in paths))
    return [int(p.read_text()) for p in paths]


@pytest.fixture
def pids_to_reap() -> Iterator[list[int]]:
    """Collect pids that the test started indirectly, and kill any still alive at the end."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def start_supervisor(
    repo_root: Path, tmp_path: Path, specs: list[dict[str, object]]
) -> subprocess.Popen[bytes]:
    """Start the supervisor process, its output going to tmp_path/supervisor.out."""
    with (tmp_path / "supervisor.out").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", DRIVER, json.dumps(specs), str(tmp_path / "log")],
            cwd=repo_root,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_it_leaves_no_child_behind_on_sigterm(
    repo_root: Path, tmp_path: Path, pids_to_reap: list[int]
) -> None:
    sleeper, parent, grandchild = (tmp_path / f"{name}.pid" for name in ("sleeper", "parent", "grandchild"))
    supervisor = start_supervisor(
        repo_root,
        tmp_path,
        [
            {"name": "sleeper", "argv": [sys.executable, "-c", SLEEPER, str(sleeper)]},
            {"name": "parent", "argv": [sys.executable, "-c", PARENT, str(parent), str(grandchild), SLEEPER]},
            {
                "name": "check",
                "argv": [sys.executable, "-c", "print('store is torn'); raise SystemExit(2)"],
                "oneshot": True,
                "essential": False,
            },
        ],
    )
    pids = read_pids(sleeper, parent, grandchild)
    pids_to_reap.extend(pids)
    output = tmp_path / "supervisor.out"
    wait_for(lambda: "store is torn" in output.read_text())
    assert supervisor.poll() is None, "a failed non-essential one-shot must not stop the others"

    supervisor.send_signal(signal.SIGTERM)

    assert supervisor.wait(timeout=20) == 0
    assert [pid for pid in pids if alive(pid)] == []
    assert "check failed with status 2 (not fatal)" in output.read_text()
    assert (tmp_path / "log" / "check.log").read_text().endswith("store is torn\n")


def test_it_stops_everything_when_an_essential_child_dies(
    repo_root: Path, tmp_path: Path, pids_to_reap: list[int]
) -> None:
    sleeper = tmp_path / "sleeper.pid"
    supervisor = start_supervisor(
        repo_root,
        tmp_path,
        [
            {"name": "sleeper", "argv": [sys.executable, "-c", SLEEPER, str(sleeper)]},
            {
                "name": "crasher",
                "argv": [
                    sys.executable,
                    "-c",
                    f"import os, time\nwhile not os.path.exists({str(sleeper)!r}): time.sleep(0.05)\n"
                    "print('boom')\nraise SystemExit(3)",
                ],
            },
        ],
    )
    (pid,) = read_pids(sleeper)
    pids_to_reap.append(pid)

    assert supervisor.wait(timeout=20) == 1
    assert not alive(pid)
    output = (tmp_path / "supervisor.out").read_text()
    assert "crasher exited with status 3 (stopping everything)" in output
    assert "| boom" in output


def test_a_blocking_one_shot_finishes_before_the_next_child_starts(
    repo_root: Path, tmp_path: Path, pids_to_reap: list[int]
) -> None:
    marker, sleeper = tmp_path / "checked", tmp_path / "sleeper.pid"
    # The service records whether the check had finished when it started.
    service = (
        "import os, sys\n"
        f"open({str(tmp_path / 'saw')!r}, 'w').write(str(os.path.exists({str(marker)!r})))\n" + SLEEPER
    )
    check = f"import time; time.sleep(0.5); open({str(marker)!r}, 'w').write('ok')"
    supervisor = start_supervisor(
        repo_root,
        tmp_path,
        [
            {"name": "check", "argv": [sys.executable, "-c", check], "oneshot": True, "blocking": True},
            {"name": "service", "argv": [sys.executable, "-c", service, str(sleeper)]},
        ],
    )
    pids_to_reap.extend(read_pids(sleeper))
    assert (tmp_path / "saw").read_text() == "True"
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=20) == 0


def test_a_failed_essential_blocking_one_shot_stops_the_start(repo_root: Path, tmp_path: Path) -> None:
    supervisor = start_supervisor(
        repo_root,
        tmp_path,
        [
            {
                "name": "check",
                "argv": [sys.executable, "-c", "raise SystemExit(4)"],
                "oneshot": True,
                "blocking": True,
            },
            {"name": "service", "argv": [sys.executable, "-c", SLEEPER, str(tmp_path / "never.pid")]},
        ],
    )
    assert supervisor.wait(timeout=20) == 1
    output = (tmp_path / "supervisor.out").read_text()
    assert "check failed with status 4 (stopping everything)" in output and "start aborted" in output
    assert not (tmp_path / "never.pid").exists()
