"""Typed reading of untrusted JSON fields: the config files, admin bodies and request bodies.

Each helper returns the field as its type, or its default when absent, and raises
``ValueError`` naming the field otherwise (a bool is never an int here, unlike in Python).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def json_int(obj: Mapping[str, Any], key: str, default: int | None = None) -> int:
    """Return ``obj[key]`` as an int (or ``default`` when absent); raise ValueError otherwise."""
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be an integer, not {value!r}")
    return value


def json_bool(obj: Mapping[str, Any], key: str, default: bool | None = None) -> bool:
    """Return ``obj[key]`` as a bool (or ``default`` when absent); raise ValueError otherwise."""
    value = obj.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, not {value!r}")
    return value


def json_str(obj: Mapping[str, Any], key: str, default: str | None = None) -> str:
    """Return ``obj[key]`` as a str (or ``default`` when absent); raise ValueError otherwise."""
    value = obj.get(key, default)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string, not {value!r}")
    return value


def json_object(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    """Return ``obj[key]`` as a JSON object ({} when absent); raise ValueError otherwise."""
    value = obj.get(key, {})
    if not isinstance(value, dict):
        raise ValueError(f"{key} must be a JSON object, not {type(value).__name__}")
    return value
