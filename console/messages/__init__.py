"""Messages: browse a topic by time with a cursor, look up by key or id, read one with its
properties and body, see which groups consumed it, resend it to a group."""
