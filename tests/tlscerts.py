"""Certificates for TLS tests, made at run time: a CA, and a server and a client certificate
for 127.0.0.1 signed by it (PEM files)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _certificate(
    name: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name, signer: Any, *, ca: bool
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
    return builder.sign(signer, hashes.SHA256())


def make_pki(where: Path) -> dict[str, str]:
    """PEM files under ``where``: ca, server and server_key, client and client_key."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Quiver test CA")])
    ca = _certificate("Quiver test CA", ca_key, ca_name, ca_key, ca=True)
    files = {"ca": where / "ca.pem"}
    files["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for who in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(f"quiver-{who}", key, ca_name, ca_key, ca=False)
        (where / f"{who}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (where / f"{who}.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        files[who] = where / f"{who}.pem"
        files[f"{who}_key"] = where / f"{who}.key"
    return {k: str(v) for k, v in files.items()}


def server_tls(pki: dict[str, str], mode: str, **more: Any) -> dict[str, Any]:
    """A server's TLS settings (NamesrvConfig / BrokerConfig keywords) with these files."""
    return {
        "tls_mode": mode,
        "tls_server_cert_path": pki["server"],
        "tls_server_key_path": pki["server_key"],
        **more,
    }
