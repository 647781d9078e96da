"""Quiver's management console: the Django project (settings, urls, asgi) and its apps.

The Celery app is imported here so that ``celery -A console`` and Django's own processes
share one app (and ``@shared_task`` tasks bind to it).
"""

from console.celery import app as celery_app

__all__ = ["celery_app"]
