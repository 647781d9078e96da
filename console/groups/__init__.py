"""Consumer groups: list with lag (messages and seconds), per-queue progress, clients,
subscription-group config, delete with an impact check, and offset resets with a preview."""
