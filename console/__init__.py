"""Quiver's management console: the Django project (settings, urls, asgi) and its apps."""
