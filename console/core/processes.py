"""Declare the processes that make up a running Quiver platform, as ``manage.py up`` starts them."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from console.core.supervisor import ChildSpec, http_ok

REPO = Path(__file__).resolve().parents[2]


def platform_children(data_dir: Path, console_port: int, *, console: bool = True) -> list[ChildSpec]:
    """Return the children to supervise, in start order; each process is one entry.

    Every child runs from the repository root and sees the same ``QUIVER_DATA_DIR``.
    """
    python = sys.executable
    console_url = f"http://127.0.0.1:{console_port}/"
    console_app = "console.asgi:application"
    children = [
        ChildSpec(
            "store-check",
            [python, "-m", "broker_core", "store", "check", "--store", str(data_dir / "store")],
            oneshot=True,
            essential=False,
        ),
    ]
    if console:
        children.append(
            ChildSpec(
                "console",
                [python, "-m", "daphne", "-b", "127.0.0.1", "-p", str(console_port), console_app],
                url=console_url,
                health=http_ok(console_url + "healthz"),
            )
        )
    shared_env = {"QUIVER_DATA_DIR": str(data_dir)}
    return [
        dataclasses.replace(spec, cwd=spec.cwd or REPO, env={**shared_env, **spec.env}) for spec in children
    ]
