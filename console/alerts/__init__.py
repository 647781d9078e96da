"""Lag alerts (issue 7): each consumer group's thresholds (console/groups' GroupMonitor)
checked by a Celery beat job against the live numbers; alerts are kept with their
resolution, pushed to the console over Channels and posted to a webhook."""
