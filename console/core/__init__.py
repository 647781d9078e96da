"""The console's core app: home page, health check, and the platform's management commands."""
