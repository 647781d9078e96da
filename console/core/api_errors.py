"""Turn errors into HTTP answers with a body that says what went wrong, never a 200.

Every error body has ``error`` (a short code) and ``detail`` (a sentence); a broker's
refusal adds ``brokerCode`` (RocketMQ's response code, by name and number), ``remark``
(the broker's own words) and ``broker`` (who answered).
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import APIException
from rest_framework.response import Response
from rest_framework.views import exception_handler

from broker_core.errors import AdminError, AdminUnreachableError
from broker_core.remoting.codes import ResponseCode

# Broker answers that mean "no such thing": the client asked for something absent.
_NOT_FOUND = {
    ResponseCode.TOPIC_NOT_EXIST,
    ResponseCode.QUERY_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
    ResponseCode.SUBSCRIPTION_NOT_EXIST,
    ResponseCode.CONSUMER_NOT_ONLINE,
    ResponseCode.PULL_NOT_FOUND,
}
_FORBIDDEN = {ResponseCode.NO_PERMISSION}
_BAD_INPUT = {ResponseCode.MESSAGE_ILLEGAL}


class ClusterNotFound(LookupError):
    """The request names a cluster the console does not manage."""


class BadQuery(APIException):
    """Query parameters a view's serializer refused: a 400 ``invalid`` as for a refused body,
    whose ``detail`` names each bad parameter and what is wrong with it, and whose ``fields``
    lists them one by one."""

    status_code = 400
    default_code = "invalid"

    def __init__(self, errors: dict[str, Any]) -> None:
        self.fields = {
            name: [str(m) for m in (msgs if isinstance(msgs, list) else [msgs])]
            for name, msgs in errors.items()
        }
        said = "; ".join(
            (" ".join(msgs) if name == "non_field_errors" else f"{name}: {' '.join(msgs)}")
            for name, msgs in self.fields.items()
        )
        super().__init__(f"bad query parameter(s): {said}")


def admin_error_body(exc: AdminError) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body for an AdminError (see the module docstring)."""
    body: dict[str, Any] = {"detail": str(exc)}
    if exc.addr:
        body["broker"] = exc.addr
    if isinstance(exc, AdminUnreachableError):
        return 503, {"error": "broker_unreachable", **body}
    if exc.code is None:
        return 400, {"error": "bad_request", **body}
    try:
        name = ResponseCode(exc.code).name
    except ValueError:
        name = str(exc.code)
    body.update(brokerCode=exc.code, brokerCodeName=name, remark=exc.remark)
    if exc.code in _NOT_FOUND:
        return 404, {"error": "not_found", **body}
    if exc.code in _FORBIDDEN:
        return 403, {"error": "broker_forbidden", **body}
    if exc.code in _BAD_INPUT:
        return 400, {"error": "bad_request", **body}
    return 502, {"error": "broker_refused", **body}


def failure_words(exc: AdminError | TimeoutError) -> str:
    """What went wrong, in words for a page: the detail, and the broker's code and remark."""
    if isinstance(exc, TimeoutError):
        return "the brokers did not answer in time"
    _status, body = admin_error_body(exc)
    remark = f" ({body['brokerCodeName']}: {body['remark']})" if body.get("remark") else ""
    return f"{body['detail']}{remark}"


def handle(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER: AdminError and unknown clusters here, the rest as DRF does,
    with every body given an ``error`` code."""
    if isinstance(exc, AdminError):
        status, body = admin_error_body(exc)
        return Response(body, status=status)
    if isinstance(exc, ClusterNotFound):
        return Response({"error": "not_found", "detail": str(exc)}, status=404)
    if isinstance(exc, BadQuery):
        return Response({"error": "invalid", "detail": str(exc.detail), "fields": exc.fields}, status=400)
    if isinstance(exc, TimeoutError):
        return Response(
            {"error": "broker_timeout", "detail": "the brokers did not answer in time"}, status=504
        )
    response = exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "error" not in response.data:
        code = getattr(exc, "default_code", "error")
        if "detail" in response.data:
            response.data = {"error": str(code), **response.data}
        else:  # a validation error: the fields and what is wrong with each
            response.data = {
                "error": "invalid",
                "detail": "the request is not valid",
                "fields": response.data,
            }
    elif response is not None and isinstance(response.data, list):
        response.data = {"error": "invalid", "detail": "; ".join(map(str, response.data))}
    return response
