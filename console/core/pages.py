"""What every server-rendered page of one cluster shares: the access check, broker calls
whose failure becomes a message on the page (never a blank or a zero), and the layout data."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from console.core.access import allowed, role_name
from console.core.api_errors import admin_error_body
from console.core.brokers import admin_call
from nameserver.clusters import ClusterRef, find_cluster, managed_clusters

T = TypeVar("T")


def cluster_for(request: HttpRequest, name: str, need: str = "view") -> ClusterRef:
    """The cluster of the URL, when the user may ``need`` on it (403 otherwise, 404 if unknown)."""
    if not allowed(request.user, name, need):
        raise PermissionDenied(f"your role on {name} does not allow this")
    try:
        return find_cluster(name)
    except LookupError as exc:
        raise Http404(str(exc)) from None


class Answer(tuple[Any, str]):
    """``(value, error)`` of a broker call, with the HTTP ``status`` a page should answer."""

    status: int


def ask(cluster: ClusterRef, call: Callable[[AdminClient], Awaitable[T]]) -> Answer:
    """``call``'s result and '' — or None and what went wrong, in words (broker named);
    ``.status`` is the HTTP status the failure maps to (200 when it worked)."""
    try:
        answer = Answer((admin_call(cluster.namesrv_addr, call), ""))
        answer.status = 200
        return answer
    except AdminError as exc:
        status, body = admin_error_body(exc)
        remark = f" ({body['brokerCodeName']}: {body['remark']})" if body.get("remark") else ""
        answer = Answer((None, f"{body['detail']}{remark}"))
    except TimeoutError:
        status, answer = 504, Answer((None, "the brokers did not answer in time"))
    answer.status = status
    return answer


# The session key of the cluster a user last opened: pages outside any cluster (Maintenance,
# Audit, a task, Health) show that cluster's menu, so the way back is one click.
CURRENT_CLUSTER = "quiver.cluster"


def remember_cluster(request: HttpRequest, cluster: ClusterRef) -> None:
    """Keep ``cluster`` as the user's current cluster (written only when it changes)."""
    session = getattr(request, "session", None)
    if session is not None and session.get(CURRENT_CLUSTER) != cluster.name:
        session[CURRENT_CLUSTER] = cluster.name


def current_cluster(request: HttpRequest | None) -> ClusterRef | None:
    """The cluster whose menu a page outside any cluster shows: the one the user last opened,
    else the first the user may view; None when the user may view none (or is signed out)."""
    user = getattr(request, "user", None)
    if request is None or user is None or not user.is_authenticated:
        return None
    visible = [c for c in managed_clusters() if allowed(user, c.name, "view")]
    remembered = getattr(request, "session", {}).get(CURRENT_CLUSTER)
    for cluster in visible:
        if cluster.name == remembered:
            return cluster
    return visible[0] if visible else None


def context(request: HttpRequest, cluster: ClusterRef, **extra: Any) -> dict[str, Any]:
    """The template context every cluster page gets: the cluster, the user's role and rights
    (and the cluster is remembered as the user's current one, for the pages outside it)."""
    remember_cluster(request, cluster)
    return {
        "cluster": cluster,
        "clusters": [c for c in managed_clusters() if allowed(request.user, c.name, "view")],
        "role": role_name(request.user, cluster.name),
        "can_operate": allowed(request.user, cluster.name, "operate"),
        "can_admin": allowed(request.user, cluster.name, "admin"),
        "can_export": allowed(request.user, cluster.name, "export"),
        **extra,
    }
