"""Topics: list with types, create/update/delete with an impact check, route, per-queue
status, consumers, test messages, offset by time."""
