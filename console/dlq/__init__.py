"""Dead-letter queues: browse a group's DLQ and send its messages back."""
