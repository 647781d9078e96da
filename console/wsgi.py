"""Expose the console as a WSGI application for servers that do not speak ASGI (no websockets)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

application = get_wsgi_application()
