"""The broker maintenance jobs as the platform runs them: Celery tasks, run records, history."""
