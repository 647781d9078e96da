"""Hold the console's cluster list: the nameserver addresses it talks to (its only DB state)."""
