"""The platform's own settings, typed: ``settings.QUIVER`` as ``console/settings.py`` builds it
from the environment (where each has its default and its check), read everywhere through
``platform_settings()`` so a checker knows every key and its type.  Tests that change one
replace ``settings.QUIVER`` with a copy (``{**settings.QUIVER, "HISTORY_DIR": tmp}``)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import TypedDict, cast

from django.conf import settings

from broker_core.remoting.tls import client_context_if


class QuiverSettings(TypedDict):
    DATA_DIR: Path
    CONSOLE_PORT: int
    NAMESRV_PORT: int
    BROKER_PORT: int
    PROXY_PORT: int
    NAMESRV_ADDR: str
    HISTORY_DIR: Path
    HISTORY_RETENTION_DAYS: int
    OFFSET_PERSIST_SECONDS: int
    EXPIRY_CHECK_SECONDS: int
    DELAY_SCAN_MAX_SLEEP_MS: int
    ALERT_CHECK_SECONDS: int
    ALERT_WEBHOOK_URL: str
    ALERT_WEBHOOK_TIMEOUT_SECONDS: int
    ALERT_WEBHOOK_ATTEMPTS: int
    REPLICATION_MAX_BEHIND_BYTES: int
    REPLICATION_MAX_BEHIND_SECONDS: int
    BROKER_TIMEOUT_SECONDS: int
    TLS_ENABLE: bool
    TLS_TRUST_CERT_PATH: str
    TLS_CERT_PATH: str
    TLS_KEY_PATH: str
    FORGET_BROKER_SECONDS: int
    REPORTS_DIR: str
    REPORTS_HISTORY_PATH: str
    REPORT_SCHEDULE_MINUTES: int
    REPORT_WINDOW_MINUTES: int
    REPORT_TIMEOUT_SECONDS: int
    SPARK_MASTER: str
    SPARK_EXECUTOR_ENV: str
    SPARK_WARM_SECONDS: int
    LONG_WORK_NICE: int


def platform_settings() -> QuiverSettings:
    """The settings in force now (a test may have replaced them)."""
    return cast(QuiverSettings, settings.QUIVER)


def tls_context() -> ssl.SSLContext | None:
    """The SSL context the platform connects to the servers with (None: plain)."""
    config = platform_settings()
    return client_context_if(
        config["TLS_ENABLE"],
        trust_cert_path=config["TLS_TRUST_CERT_PATH"],
        cert_path=config["TLS_CERT_PATH"],
        key_path=config["TLS_KEY_PATH"],
    )


def tls_source_options() -> list[str]:
    """The same, as the Spark source's options (``--source-option`` arguments)."""
    config = platform_settings()
    if not config["TLS_ENABLE"]:
        return []
    options = {
        "tlsEnable": "true",
        "tlsTrustCertPath": config["TLS_TRUST_CERT_PATH"],
        "tlsCertPath": config["TLS_CERT_PATH"],
        "tlsKeyPath": config["TLS_KEY_PATH"],
    }
    return [arg for key, value in options.items() if value for arg in ("--source-option", f"{key}={value}")]
