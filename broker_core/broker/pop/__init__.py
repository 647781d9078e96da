"""RocketMQ 5 pop consumption: books of what is in flight, their journal, the service."""
