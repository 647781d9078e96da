"""Settings every client of a cluster shares (RocketMQ ``ClientConfig``).

A process has one client instance per client id, ``<client ip>@<instance name>``: its
producers and consumers share the instance's connections, route cache and heartbeats.
As in RocketMQ, the default instance name "DEFAULT" becomes the process id, so two
processes on one machine never share an id.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import ssl
from dataclasses import dataclass

from broker_core.errors import ConfigError
from broker_core.remoting.busypoll import DEFAULT_BUSY_POLL_MICROS, check_busy_poll_micros
from broker_core.remoting.tls import client_context_if

DEFAULT_INSTANCE_NAME = "DEFAULT"


def local_ip() -> str:
    """The address this host reaches others from (no packet is sent); 127.0.0.1 offline."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: routing decides, nothing is sent
            address = probe.getsockname()[0]
        except OSError:
            return "127.0.0.1"
    return address if address and not address.startswith("0.") else "127.0.0.1"


@dataclass(frozen=True)
class ClientConfig:
    """Where the nameservers are, who this client is, and its timers (milliseconds)."""

    namesrv_addr: str = ""
    instance_name: str = DEFAULT_INSTANCE_NAME
    client_ip: str = dataclasses.field(default_factory=local_ip)
    # How often topic routes are re-read from the nameservers.
    poll_name_server_interval: int = 30_000
    # How often every broker of interest gets a heartbeat.
    heartbeat_broker_interval: int = 30_000
    # How often consumers commit their offsets.
    persist_consumer_offset_interval: int = 5_000
    # How long a request to a nameserver or broker may take.
    request_timeout_ms: int = 3_000
    # An ACL account (plain_acl.yml): every request is signed with it when set.
    access_key: str | None = None
    secret_key: str | None = None
    # TLS to the servers (RocketMQ: tls.enable, tls.client.*): needed by a server with
    # tlsMode = enforcing.  The server is checked against the trusted certificates when
    # given (RocketMQ's clients check nothing by default); a client certificate is sent when
    # given (a server with tlsServerNeedClientAuth = require wants one).
    tls_enable: bool = False
    tls_client_trust_cert_path: str = ""
    tls_client_cert_path: str = ""
    tls_client_key_path: str = ""
    tls_client_key_password: str = ""
    # Quiver: how long (µs) a thread sending synchronously polls its socket for the answer
    # before it sleeps (``remoting.busypoll``; adaptive, 0 = never).
    busy_poll_micros: int = DEFAULT_BUSY_POLL_MICROS

    def __post_init__(self) -> None:
        if self.instance_name == DEFAULT_INSTANCE_NAME:
            object.__setattr__(self, "instance_name", str(os.getpid()))
        for name in ("poll_name_server_interval", "heartbeat_broker_interval", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        check_busy_poll_micros("busy_poll_micros", self.busy_poll_micros)
        if bool(self.access_key) != bool(self.secret_key):
            raise ConfigError("an ACL account needs both an access key and a secret key")

    def tls_context(self) -> ssl.SSLContext | None:
        """The SSL context connections are made with (None: plain)."""
        return client_context_if(
            self.tls_enable,
            trust_cert_path=self.tls_client_trust_cert_path,
            cert_path=self.tls_client_cert_path,
            key_path=self.tls_client_key_path,
            key_password=self.tls_client_key_password,
        )

    @property
    def namesrv_addrs(self) -> list[str]:
        return [addr.strip() for addr in self.namesrv_addr.split(";") if addr.strip()]

    @property
    def client_id(self) -> str:
        return f"{self.client_ip}@{self.instance_name}"
