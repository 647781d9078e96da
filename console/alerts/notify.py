"""Announce an alert's raise or resolve: to the console over Channels, and to a webhook.

The payload (the same for both)::

    {"event": "raised" | "resolved", "text": "<one line for chat webhooks>",
     "alert": {id, cluster, group, kind, threshold, value, lastValue, message, open,
               raisedAt, resolvedAt, resolution, webhook: {...}}}

The webhook gets it as a JSON POST with a short timeout and a few attempts; how that went
is kept on the alert (status, attempts, last error).  Nothing here raises: an unreachable
webhook or Redis is recorded and logged, and the check goes on.
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import orjson
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db.models import F

from console.alerts.models import Alert
from console.quiver import platform_settings

log = logging.getLogger(__name__)

# The Channels group every signed-in page's alert socket joins (console/alerts/consumers.py).
CHANNEL_GROUP = "alerts"


def payload(event: str, alert: Alert) -> dict[str, Any]:
    """What the console and the webhook receive for ``event`` (raised or resolved)."""
    verb = "ALERT" if event == "raised" else "RESOLVED"
    return {"event": event, "text": f"[{verb}] {alert.message}", "alert": alert.to_json()}


def push_to_console(body: dict[str, Any]) -> bool:
    """Send ``body`` to every open alert socket (the channel layer: Redis under ``up``)."""
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        async_to_sync(layer.group_send)(CHANNEL_GROUP, {"type": "alert.event", "body": body})
        return True
    except Exception as exc:  # the console misses a toast; the alert is kept all the same
        log.warning("alerts: could not push alert %s to the console: %s", body["alert"]["id"], exc)
        return False


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A webhook is POSTed to the URL configured, never where its answer points (a redirect
    could lead to another scheme or host): a 3xx is reported as the failure it is."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def post_webhook(url: str, body: dict[str, Any], timeout: float, attempts: int) -> tuple[bool, int, str]:
    """POST ``body`` as JSON to ``url``; (delivered, attempts made, last error).  Never raises."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        return False, 0, f"not an http(s) URL: {url[:200]!r}"
    data = orjson.dumps(body)
    error = ""
    for attempt in range(1, attempts + 1):
        request = urllib.request.Request(
            url,
            data=data,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "quiver-alerts/1"},
        )
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                response.read(1024)
                if 200 <= (response.status or 0) < 300:
                    return True, attempt, ""
                error = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            error = f"HTTP {exc.code} {exc.reason}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
        except Exception as exc:  # noqa: BLE001 - a malformed answer must not stop the alerting
            error = f"{type(exc).__name__}: {exc}"
        if attempt < attempts:
            time.sleep(min(1.0, timeout / 2))
    return False, attempts, error


def deliver_webhook(alert_id: int, url: str, body: dict[str, Any]) -> str:
    """Post ``body`` to ``url`` and record the outcome on the alert; return its status."""
    quiver = platform_settings()
    ok, tries, error = post_webhook(
        url, body, float(quiver["ALERT_WEBHOOK_TIMEOUT_SECONDS"]), int(quiver["ALERT_WEBHOOK_ATTEMPTS"])
    )
    status = Alert.WEBHOOK_DELIVERED if ok else Alert.WEBHOOK_FAILED
    if not ok:
        log.warning("alerts: webhook %s refused alert %s (%s tries): %s", url, alert_id, tries, error)
    Alert.objects.filter(pk=alert_id).update(
        webhook_status=status, webhook_attempts=F("webhook_attempts") + tries, webhook_error=error
    )
    return status


def mark_pending(alert_id: int) -> None:
    Alert.objects.filter(pk=alert_id).update(webhook_status=Alert.WEBHOOK_PENDING)
