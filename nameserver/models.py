"""Hold the console's cluster list: the nameserver addresses it talks to (its only DB state)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from broker_core.client.admin import parse_namesrv_addr


def validate_namesrv_addr(value: str) -> None:
    """A ``host:port[;host:port...]`` list, as RocketMQ's namesrvAddr is written."""
    addrs = parse_namesrv_addr(value)
    if not addrs:
        raise ValidationError("give at least one nameserver as host:port")
    for addr in addrs:
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValidationError(f"{addr!r} is not host:port")


class Cluster(models.Model):
    """One RocketMQ cluster the console manages, reached through its nameservers.

    With no row, the platform manages the cluster at ``settings.QUIVER["NAMESRV_ADDR"]``.
    """

    name = models.SlugField(max_length=64, unique=True)
    namesrv_addr = models.CharField(max_length=512, validators=[validate_namesrv_addr])
    description = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.namesrv_addr})"
