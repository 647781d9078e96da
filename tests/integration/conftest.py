"""Helpers for integration tests that start our own servers from the command line."""

from __future__ import annotations

from pathlib import Path

from broker_core.testing import cli_server

REPO = Path(__file__).resolve().parents[2]

__all__ = ["REPO", "cli_server"]
