"""TLS on the remoting protocol, as RocketMQ serves it: ``tlsMode`` and the ``tls.*`` settings.

A RocketMQ server takes TLS and plain clients on one port: a connection whose first byte
is 0x16 (a TLS handshake record) speaks TLS, any other speaks the plain protocol.
``tlsMode`` says which it accepts: ``disabled`` (plain only; a TLS handshake is closed),
``permissive`` (both) or ``enforcing`` (TLS only; a plain connection is closed).  The
server's certificate and key, the certificates it trusts for client certificates and
whether it asks for one are RocketMQ's ``tls.server.*`` settings; a client turns TLS on with
``tlsEnable`` (Java: ``-Dtls.enable=true``) and may check the server against its own trust.

The server side runs TLS in memory (``ssl.SSLObject`` over two ``MemoryBIO``): the
connection keeps its transport and its framing, decrypting what it reads before splitting
frames and encrypting what it writes after joining them, so the first byte can be looked
at before choosing, and a plain connection pays nothing.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from broker_core.errors import ConfigError

DISABLED, PERMISSIVE, ENFORCING = "disabled", "permissive", "enforcing"
TLS_MODES = (DISABLED, PERMISSIVE, ENFORCING)
CLIENT_AUTH = ("none", "optional", "require")
HANDSHAKE_RECORD = 0x16
"""The first byte of a TLS connection (a handshake record)."""

_READ_CHUNK = 256 * 1024


@dataclass(frozen=True)
class TlsServerSettings:
    """A server's TLS (RocketMQ: ``tls.server.mode``, ``tls.server.certPath``, ...)."""

    mode: str = DISABLED
    cert_path: str = ""
    key_path: str = ""
    key_password: str = ""
    trust_cert_path: str = ""
    need_client_auth: str = "none"

    def __post_init__(self) -> None:
        if self.mode not in TLS_MODES:
            raise ConfigError(f"tlsMode must be disabled, permissive or enforcing, not {self.mode!r}")
        if self.need_client_auth not in CLIENT_AUTH:
            raise ConfigError(
                f"tlsServerNeedClientAuth must be none, optional or require, not {self.need_client_auth!r}"
            )
        if self.mode == DISABLED:
            return
        for key, path in (("tlsServerCertPath", self.cert_path), ("tlsServerKeyPath", self.key_path)):
            if not path:
                raise ConfigError(f"tlsMode = {self.mode} needs {key} (a PEM file)")
            if not Path(path).is_file():
                raise ConfigError(f"{key} = {path}: no such file")
        if self.need_client_auth != "none" and not self.trust_cert_path:
            raise ConfigError(
                "tlsServerNeedClientAuth asks for client certificates: tlsServerTrustCertPath must "
                "name the certificates that sign them"
            )

    def context(self) -> ssl.SSLContext | None:
        """The server's SSL context (None when TLS is disabled).

        Raises ConfigError when the certificate, key or trust cannot be loaded.
        """
        if self.mode == DISABLED:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.cert_path, self.key_path, self.key_password or None)
            if self.trust_cert_path:
                context.load_verify_locations(self.trust_cert_path)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load the server's TLS certificate, key or trust: {exc}") from None
        context.verify_mode = {
            "none": ssl.CERT_NONE,
            "optional": ssl.CERT_OPTIONAL,
            "require": ssl.CERT_REQUIRED,
        }[self.need_client_auth]
        return context


# The environment our tools read for TLS to the servers: the console with its Celery jobs
# and Spark reports (console/settings.py), and quiver-admin.
TLS_ENABLE_ENV = "QUIVER_TLS_ENABLE"
TLS_TRUST_CERT_PATH_ENV = "QUIVER_TLS_TRUST_CERT_PATH"
TLS_CERT_PATH_ENV = "QUIVER_TLS_CERT_PATH"
TLS_KEY_PATH_ENV = "QUIVER_TLS_KEY_PATH"


def outgoing_context(
    enabled: bool,
    *,
    trust_cert_path: str = "",
    cert_path: str = "",
    key_path: str = "",
    key_password: str = "",
) -> ssl.SSLContext | None:
    """The SSL context of a server's own connections out (a broker to its nameservers, the
    proxy to the cluster) from its ``tlsEnable`` and ``tlsClient*`` settings; None: plain.

    Raises ConfigError for a file that cannot be loaded, or a ``tlsClient*`` path given
    without ``tlsEnable`` (it would do nothing)."""
    if not enabled:
        for key, value in (
            ("tlsClientTrustCertPath", trust_cert_path),
            ("tlsClientCertPath", cert_path),
            ("tlsClientKeyPath", key_path),
        ):
            if value:
                raise ConfigError(f"{key} is set but tlsEnable is false: set tlsEnable = true to use it")
    return client_context_if(
        enabled,
        trust_cert_path=trust_cert_path,
        cert_path=cert_path,
        key_path=key_path,
        key_password=key_password,
    )


def client_context_if(
    enabled: bool,
    *,
    trust_cert_path: str = "",
    cert_path: str = "",
    key_path: str = "",
    key_password: str = "",
) -> ssl.SSLContext | None:
    """``client_context`` with these files when TLS is on; None (plain) when it is off,
    whatever paths are given (a client's settings: ours, the console's, a Spark source's)."""
    if not enabled:
        return None
    return client_context(
        trust_cert_path=trust_cert_path, cert_path=cert_path, key_path=key_path, key_password=key_password
    )


def client_context(
    *, trust_cert_path: str = "", cert_path: str = "", key_path: str = "", key_password: str = ""
) -> ssl.SSLContext:
    """A client's SSL context: the server checked against ``trust_cert_path`` when given (else,
    as RocketMQ's clients do by default, not checked); a client certificate when given.

    Raises ConfigError when the trust, certificate or key cannot be loaded."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False  # brokers are named by ip:port in routes
    context.verify_mode = ssl.CERT_REQUIRED if trust_cert_path else ssl.CERT_NONE
    if key_path and not cert_path:
        raise ConfigError("a TLS client key needs its certificate (the client cert path) too")
    try:
        if trust_cert_path:
            context.load_verify_locations(trust_cert_path)
        if cert_path:
            context.load_cert_chain(cert_path, key_path or None, key_password or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the client's TLS trust, certificate or key: {exc}") from None
    return context


class TlsSession:
    """One server-side connection's TLS, in memory.

    ``receive(data)`` takes bytes read from the socket and returns the plain bytes they
    complete (handshaking first); ``wrap(data)`` returns what to write for plain ``data``;
    ``outgoing()`` what the handshake or an alert wants written now.  Raises ssl.SSLError
    on a failed handshake or a bad record: the connection must close.
    """

    __slots__ = ("_incoming", "_outgoing", "_tls", "handshaken", "peer_closed")

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.handshaken = False
        self.peer_closed = False

    def receive(self, data: bytes) -> bytes:
        self._incoming.write(data)
        if not self.handshaken:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            self.handshaken = True
        chunks = []
        while True:
            try:
                chunk = self._tls.read(_READ_CHUNK)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self.peer_closed = True
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def wrap(self, data: bytes) -> bytes:
        self._tls.write(data)
        return self._outgoing.read()

    def outgoing(self) -> bytes:
        return self._outgoing.read()
