"""Reading custom-header (extFields) values, which arrive as strings whatever their type.

Java writes booleans as ``true``/``false``, the C++ client as ``1``/``0`` (and reads them
with ``atoi``); both spellings are accepted here.
"""

from __future__ import annotations


def header_bool(value: str | None) -> bool:
    """``"true"``/``"1"`` (any case, spaces ignored) -> True; anything else -> False."""
    return (value or "").strip().lower() in ("true", "1")


def header_bool_for(value: bool, language: str) -> str:
    """A boolean as the receiving client reads it: ``1``/``0`` for C++, ``true``/``false`` otherwise."""
    if language == "CPP":
        return "1" if value else "0"
    return "true" if value else "false"
