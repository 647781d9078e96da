"""Helpers for integration tests that start our own servers from the command line."""

from __future__ import annotations

from broker_core.testing import cli_server

__all__ = ["cli_server"]
