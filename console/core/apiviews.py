"""The base of every API view under ``/api/clusters/<cluster>/``: the cluster is part of the
URL (chosen per request, never a global switch), access is checked per cluster, and broker
calls go through ``broker_core``'s AdminClient.  Also what every API view shares: query
parameters validated by a serializer (``query``: a 400 naming the parameter), the page of a
list (``PageQuery``, ``page_of``) and the OpenAPI description (``documented``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cached_property
from typing import Any, TypeVar

from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from console.core.access import ClusterPermission
from console.core.actions import Actor, NotConfirmed
from console.core.api_errors import BadQuery, ClusterNotFound
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


def documented(
    summary: str,
    request: object = None,
    operation_id: str | None = None,
    query: type[serializers.Serializer] | None = None,
    responses: object = None,
) -> Callable[[T], T]:
    """OpenAPI description of an endpoint: its ``query`` parameters (the serializer ``query()``
    validates them with) and its ``responses`` (a serializer, or a dict by status code);
    without one, the answer is described as a JSON object (see the view's docstring)."""
    from drf_spectacular.types import OpenApiTypes
    from drf_spectacular.utils import extend_schema

    return extend_schema(  # type: ignore[return-value]
        summary=summary,
        request=request,
        responses=responses if responses is not None else OpenApiTypes.OBJECT,
        operation_id=operation_id,
        parameters=[query] if query is not None else None,
    )


def query(request: Request, serializer: type[serializers.Serializer]) -> dict[str, Any]:
    """The query parameters ``serializer`` declares, validated and converted; a bad one is a
    400 (``BadQuery``) that names it, before any broker is asked."""
    form = serializer(data=request.query_params)
    if not form.is_valid():
        raise BadQuery(form.errors)
    return dict(form.validated_data)


PAGE_SIZE_MAX = 500


class PageQuery(serializers.Serializer):
    """``page`` (from 1) and ``page_size`` (1 to 500, default 100) of a list; values out of
    range are brought within it."""

    page = serializers.IntegerField(required=False, default=1)
    page_size = serializers.IntegerField(required=False, default=100)

    def validate_page(self, value: int) -> int:
        return max(1, value)

    def validate_page_size(self, value: int) -> int:
        return max(1, min(PAGE_SIZE_MAX, value))


def page_of(rows: list[Any], asked: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The page of ``rows`` a validated ``PageQuery`` asked for, with the total count (and ``extra``)."""
    page, size = asked["page"], asked["page_size"]
    start = (page - 1) * size
    return {
        "count": len(rows),
        "page": page,
        "pageSize": size,
        "results": rows[start : start + size],
        **extra,
    }


def creation(request: Request, serializer: type[serializers.Serializer], what: str) -> dict[str, Any]:
    """The validated body of a create (a 400 naming what is wrong), which must give the new
    ``what``'s ``name``."""
    form = serializer(data=request.data)
    form.is_valid(raise_exception=True)
    if "name" not in form.validated_data:
        raise AdminError(f"give the {what}'s name")
    return dict(form.validated_data)


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


class ConfirmQuery(serializers.Serializer):
    """``confirm``: a delete goes ahead only when it names its target again."""

    confirm = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)


def documented_delete(summary: str, unconfirmed: type[serializers.Serializer]) -> Callable[[T], T]:
    """OpenAPI description of a DELETE answered by ``confirmed_delete``: its ``confirm``
    parameter, the 204, and the 409 (``unconfirmed``: the impact to check first)."""
    return documented(summary, query=ConfirmQuery, responses={204: None, 409: unconfirmed})


def confirmed_delete(
    view: ClusterAPIView,
    name: str,
    delete: Callable[[Actor, ClusterRef, str, str], object],
    impact: Callable[[AdminClient, str], Awaitable[Any]],
) -> Response:
    """DELETE of ``name`` with ``delete(actor, cluster, name, confirm)``: 204 once done; a
    409 with ``impact(admin, name)`` while ``?confirm=`` does not name it (nothing done)."""
    request = view.request
    try:
        delete(request, view.cluster, name, query(request, ConfirmQuery)["confirm"])
    except NotConfirmed:
        found = view.admin(lambda admin: impact(admin, name))
        detail = f"check the impact, then repeat with ?confirm={name}"
        return Response(
            {"error": "confirm", "detail": detail, "impact": found}, status=status.HTTP_409_CONFLICT
        )
    return Response(status=status.HTTP_204_NO_CONTENT)
