"""Remoting tests run on both event loops the broker may use: asyncio's and uvloop's."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import uvloop

# shared/ sits beside the repository (as in CI); QUIVER_CAPTURES points elsewhere.
CAPTURES = Path(
    os.environ.get(
        "QUIVER_CAPTURES", Path(__file__).resolve().parents[4] / "shared" / "reference" / "captures"
    )
)


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def captured_requests(name: str) -> list[dict[str, Any]]:
    """Return the frames the C++ client sent (``dir`` = in) in one capture file."""
    path = CAPTURES / name
    if not path.exists():
        pytest.skip(f"capture {path} is not available")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [line for line in lines if line.get("dir") == "in"]


def frame_of(line: dict[str, Any]) -> tuple[bytes, bytes]:
    """Return (frame without its length prefix, body) for one captured frame."""
    body = bytes.fromhex(line["body_hex"]) if "body_hex" in line else line["body"].encode()
    return bytes.fromhex(line["hdr_word_hex"]) + line["header_raw"].encode() + body, body
