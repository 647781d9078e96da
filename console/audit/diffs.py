"""An audit row's before and after as people read them: one line per field, before → after.

``before`` and ``after`` are JSON values (objects, mostly).  Rows written before they were
made JSON-safe on the way in may hold the Python text of a dict (``"{'retryMaxTimes': 3}"``);
``decoded`` reads such text back into the value it spells, so old rows show as fields too
and the API returns objects for them.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

# A field shown for a value that is not an object (a list, a number, a text).
WHOLE = "value"


@dataclass(frozen=True)
class FieldChange:
    """One field of an audit row: its text before and after (None: the field was absent)."""

    field: str
    before: str | None
    after: str | None

    @property
    def changed(self) -> bool:
        return self.before != self.after


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON data (dicts, lists, text, numbers, booleans, None): mappings and
    sequences of any kind become dicts and lists, anything else JSON cannot hold its text."""
    return json.loads(json.dumps(value, default=str))


def decoded(value: Any) -> Any:
    """``value``, with the Python text of a dict or list (as old rows hold) read back."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        for parse in (json.loads, ast.literal_eval):
            try:
                found = parse(value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(found, dict | list):
                return json_safe(found)
    return value


def shown(value: Any) -> str:
    """One value as a person reads it: text as it is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def field_changes(before: Any, after: Any) -> list[FieldChange]:
    """The fields of ``before`` and ``after``, in the order they first appear (after's first);
    a value that is not an object is one field, ``value``.  Empty when both are None."""
    before, after = decoded(before), decoded(after)
    if before is None and after is None:
        return []
    if not isinstance(before, dict | None) or not isinstance(after, dict | None):
        return [
            FieldChange(
                WHOLE, None if before is None else shown(before), None if after is None else shown(after)
            )
        ]
    old, new = before or {}, after or {}
    names = list(dict.fromkeys([*new, *old]))
    return [
        FieldChange(
            str(name),
            shown(old[name]) if name in old else None,
            shown(new[name]) if name in new else None,
        )
        for name in names
    ]
