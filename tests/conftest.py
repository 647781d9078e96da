"""Fixtures shared by every test layer; each layer keeps its own in its directory."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """Return the repository's root directory."""
    return REPO
