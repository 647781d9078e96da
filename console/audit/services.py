"""Write audit rows: ``audited`` wraps a mutating action so its row is written whatever happens."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest

from console.audit.diffs import json_safe
from console.audit.models import AuditEntry


@dataclass
class Audit:
    """The row being prepared: the action may fill ``before`` and ``after`` as it learns them."""

    before: Any = None
    after: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def _remote(request: HttpRequest | None) -> str:
    return (request.META.get("REMOTE_ADDR") or "") if request is not None else ""


@contextlib.contextmanager
def audited(request: HttpRequest | Any, action: str, cluster: str = "", target: str = "") -> Iterator[Audit]:
    """Record ``action`` on ``target``: ``ok`` when the block ends, ``error`` (re-raised) if it raises."""
    audit = Audit()
    user = getattr(request, "user", None)
    row = AuditEntry(
        user=user if user is not None and user.is_authenticated else None,
        username=user.get_username() if user is not None and user.is_authenticated else "",
        action=action,
        cluster=cluster,
        target=target[:300],
        remote_addr=_remote(getattr(request, "_request", request)),
    )
    try:
        yield audit
    except BaseException as exc:
        row.result, row.detail = "error", f"{type(exc).__name__}: {exc}"
        row.before, row.after = json_safe(audit.before), json_safe(audit.after)
        row.save()
        raise
    row.result = "ok"
    # Stored as plain JSON (not whatever objects the action held), so the page and the API
    # read fields back, never the Python text of a dict.
    row.before, row.after = json_safe(audit.before), json_safe(audit.after)
    row.save()
