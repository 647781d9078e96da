"""Who may do what on which cluster: roles from ``ClusterAccess``, checked for every request.

``need`` is one of ``view``, ``operate``, ``admin`` or ``export``.  A cluster-specific row
wins over the ``*`` row; superusers may do everything.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from console.core.models import ClusterAccess

RANK = {ClusterAccess.VIEWER: 1, ClusterAccess.OPERATOR: 2, ClusterAccess.ADMIN: 3}
NEEDS = {"view": 1, "operate": 2, "admin": 3}


def access_of(user: AbstractBaseUser | AnonymousUser, cluster: str) -> ClusterAccess | None:
    """The row that decides ``user``'s rights on ``cluster`` (None: no access)."""
    if not user.is_authenticated:
        return None
    rows = {row.cluster: row for row in ClusterAccess.objects.filter(user=user, cluster__in=[cluster, "*"])}
    return rows.get(cluster) or rows.get(ClusterAccess.ALL_CLUSTERS)


def allowed(user: AbstractBaseUser | AnonymousUser, cluster: str, need: str) -> bool:
    """True when ``user`` may ``need`` (view, operate, admin, export) on ``cluster``."""
    if not user.is_authenticated:
        return False
    if getattr(user, "is_superuser", False):
        return True
    row = access_of(user, cluster)
    if row is None:
        return False
    if need == "export":
        return row.can_export
    return RANK[row.role] >= NEEDS[need]


def role_name(user: AbstractBaseUser | AnonymousUser, cluster: str) -> str | None:
    """The user's role on ``cluster`` for display (``admin`` for superusers)."""
    if getattr(user, "is_superuser", False):
        return ClusterAccess.ADMIN
    row = access_of(user, cluster)
    return row.role if row else None


class ClusterPermission(BasePermission):
    """DRF permission for views under ``/api/clusters/<cluster>/``.

    Reads need ``view``; writes need the view's ``needs`` entry for the method (``operate``
    unless it says otherwise), e.g. ``needs = {"DELETE": "admin"}``.
    """

    message = "your role on this cluster does not allow this"

    def has_permission(self, request: Request, view: Any) -> bool:
        cluster = view.kwargs.get("cluster", "")
        method = request.method or "GET"
        need = "view" if method in SAFE_METHODS else getattr(view, "needs", {}).get(method, "operate")
        return allowed(request.user, cluster, need)
