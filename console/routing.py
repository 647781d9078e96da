"""Route the console's websocket URLs to Channels consumers (the live-update pushes)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver

websocket_urlpatterns: list[URLPattern | URLResolver] = []
