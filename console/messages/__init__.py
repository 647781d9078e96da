"""Messages: find one from any id or key (one box on every cluster page), browse a topic
by time and tag newest first with a cursor, read one with its properties and body, see
which groups consumed it, resend it to a group."""
