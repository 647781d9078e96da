"""Tag expressions, as subscriptions write them: ``"TagA || TagB"``, or ``*`` for everything.

One reading for the broker (which filters pulls by the tags' hash codes) and for the
clients (which filter again by the tag strings).
"""

from __future__ import annotations

SUB_ALL = "*"


def parse_tags(expression: str | None) -> frozenset[str] | None:
    """``"TagA || TagB"`` -> {"TagA", "TagB"}; ``*`` or empty -> None (every message)."""
    if expression is None or expression.strip() in ("", SUB_ALL):
        return None
    tags = frozenset(part.strip() for part in expression.split("||") if part.strip())
    return tags or None
