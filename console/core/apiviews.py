"""The base of every API view under ``/api/clusters/<cluster>/``: the cluster is part of the
URL (chosen per request, never a global switch), access is checked per cluster, and broker
calls go through ``broker_core``'s AdminClient."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cached_property
from typing import TypeVar

from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.views import APIView

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from console.core.access import ClusterPermission
from console.core.api_errors import ClusterNotFound
from console.core.brokers import admin_call
from nameserver.clusters import ClusterRef, find_cluster

T = TypeVar("T")


class ClusterAPIView(APIView):
    """An API view of one cluster: ``self.cluster`` and ``self.admin(call)``."""

    permission_classes = [IsAuthenticated, ClusterPermission]

    @cached_property
    def cluster(self) -> ClusterRef:
        try:
            return find_cluster(self.kwargs["cluster"])
        except LookupError as exc:
            raise ClusterNotFound(str(exc)) from None

    def admin(self, call: Callable[[AdminClient], Awaitable[T]]) -> T:
        """Run ``call(admin)`` against this cluster's nameservers (errors become HTTP answers)."""
        return admin_call(self.cluster.namesrv_addr, call)


def documented(summary: str, request: object = None, operation_id: str | None = None) -> Callable[[T], T]:
    """OpenAPI description of an endpoint whose answer is a JSON object (see its docstring)."""
    from drf_spectacular.types import OpenApiTypes
    from drf_spectacular.utils import extend_schema

    return extend_schema(  # type: ignore[return-value]
        summary=summary, request=request, responses=OpenApiTypes.OBJECT, operation_id=operation_id
    )


def query_int(request: Request, name: str, default: int) -> int:
    """The query parameter ``name`` as an integer (``default`` when absent); a non-integer is
    an AdminError, which the API answers as a 400 naming the parameter."""
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError:
        raise AdminError(f"{name} must be an integer, not {raw!r}") from None
