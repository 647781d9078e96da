"""The audit log: every mutating action, who did it, before and after, and how it ended."""
