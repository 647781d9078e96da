"""Helpers for tests that drive Quiver with the official RocketMQ C++ client."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("rocketmq.client", reason="the official client (rocketmq==0.4.4) is in the test extra")

HERE = Path(__file__).resolve().parent


async def run_official_client(
    script: str, *args: str, home: Path, timeout: float = 90.0, extra_env: dict[str, str] | None = None
) -> list[dict]:
    """Run one of this folder's client scripts in a child process; return its JSON lines.

    ``home`` becomes the child's HOME: the C++ client writes its logs under it.
    """
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(HERE.parents[1]), **(extra_env or {})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / script),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"{script} did not finish within {timeout} s") from None
    assert proc.returncode == 0, f"{script} exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}"
    return [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
