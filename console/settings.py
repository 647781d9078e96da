"""Django settings for Quiver's console: the one place the environment is read.

Every environment variable goes through ``envbool``/``envint``/``envstr``/``envsecret``,
which raise ``ImproperlyConfigured`` on a bad value instead of guessing. Console knobs sit
in the ``QUIVER`` dict.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

from broker_core.remoting.tls import (
    TLS_CERT_PATH_ENV,
    TLS_ENABLE_ENV,
    TLS_KEY_PATH_ENV,
    TLS_TRUST_CERT_PATH_ENV,
)
from console.quiver import QuiverSettings

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def envstr(name: str, default: str) -> str:
    """Return the variable's value, or ``default`` when it is unset."""
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    """Return the variable as a boolean: 1/true/yes/on or 0/false/no/off, any case."""
    value = os.environ.get(name)
    if value is None:
        return default
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true or false)")


def envint(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return the variable as an integer within [minimum, maximum] when those are given."""
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise ImproperlyConfigured(f"{name}={number} is outside [{minimum}, {maximum}]")
    return number


def tls_path(name: str) -> str:
    """A PEM file the platform's TLS uses: the variable's value, which must name a file."""
    value = os.environ.get(name, "").strip()
    if value and not Path(value).is_file():
        raise ImproperlyConfigured(f"{name}={value!r}: no such file (a PEM certificate or key)")
    return value


def spark_executor_env() -> str:
    """``QUIVER_SPARK_EXECUTOR_ENV`` (ship or none); ImproperlyConfigured with its sentence."""
    from spark_reports.executorenv import ExecutorEnvError, mode

    try:
        return mode()
    except ExecutorEnvError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def envsecret(name: str) -> str | None:
    """Return a secret from ``NAME`` or from the file named by ``NAME_FILE`` (Docker secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc}") from exc
    return os.environ.get(name) or None


def persistent_secret_key(path: Path) -> str:
    """Return the key stored at ``path``, generating it on first use.

    Safe against concurrent first starts: the key is linked into place atomically, so
    every process ends up with the same one.
    """
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    candidate = path.with_name(f".{path.name}.{os.getpid()}")
    candidate.write_text(secrets.token_urlsafe(50) + "\n")
    candidate.chmod(0o600)
    try:
        os.link(candidate, path)
    except FileExistsError:
        pass
    finally:
        candidate.unlink()
    return path.read_text().strip()


def database_from_url(url: str) -> dict[str, Any]:
    """Return a Django ``DATABASES`` entry for a ``postgres://`` or ``sqlite:///`` URL."""
    parts = urlsplit(url)
    if parts.scheme in ("postgres", "postgresql", "pgsql"):
        try:
            port = parts.port
        except ValueError:
            raise ImproperlyConfigured(f"DATABASE_URL has a bad port: {url!r}") from None
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            # A percent-encoded host such as %2Fvar%2Frun%2Fpostgresql is a socket directory.
            "HOST": unquote(parts.hostname or ""),
            "PORT": str(port or ""),
            "OPTIONS": dict(parse_qsl(parts.query)),
            "CONN_MAX_AGE": 60,
        }
    if parts.scheme == "sqlite":
        # sqlite:///rel.db is relative to the working directory, sqlite:////abs.db absolute.
        name = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
        if not name:
            raise ImproperlyConfigured(f"DATABASE_URL names no SQLite file: {url!r}")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": name}
    raise ImproperlyConfigured(f"DATABASE_URL scheme {parts.scheme!r} is not supported (postgres, sqlite)")


DATA_DIR = Path(envstr("QUIVER_DATA_DIR", str(BASE_DIR / "var"))).expanduser().resolve()

SECRET_KEY = envsecret("DJANGO_SECRET_KEY") or persistent_secret_key(DATA_DIR / "secret_key")
DEBUG = envbool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = [
    host.strip() for host in envstr("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if host.strip()
]

_NAMESRV_PORT = envint("QUIVER_NAMESRV_PORT", 9876, minimum=1, maximum=65535)

QUIVER: QuiverSettings = {
    "DATA_DIR": DATA_DIR,
    "CONSOLE_PORT": envint("QUIVER_CONSOLE_PORT", 8000, minimum=1, maximum=65535),
    "NAMESRV_PORT": _NAMESRV_PORT,
    "BROKER_PORT": envint("QUIVER_BROKER_PORT", 10911, minimum=1, maximum=65535),
    # The gRPC proxy for RocketMQ 5 clients (RocketMQ's grpcServerPort default).
    "PROXY_PORT": envint("QUIVER_PROXY_PORT", 8081, minimum=1, maximum=65535),
    # The nameservers of the cluster the platform manages when no cluster is configured
    # in the console (the ``up`` command's own nameserver by default).
    "NAMESRV_ADDR": envstr("QUIVER_NAMESRV_ADDR", f"127.0.0.1:{_NAMESRV_PORT}"),
    # Offset history and traffic counters (the Spark reports' input), date-partitioned.
    "HISTORY_DIR": Path(envstr("QUIVER_HISTORY_DIR", str(DATA_DIR / "history"))).expanduser(),
    "HISTORY_RETENTION_DAYS": envint("QUIVER_HISTORY_RETENTION_DAYS", 30, minimum=1),
    # How often the maintenance jobs run (Celery beat); see console/maintenance/jobs.py.
    "OFFSET_PERSIST_SECONDS": envint("QUIVER_OFFSET_PERSIST_SECONDS", 5, minimum=1),
    "EXPIRY_CHECK_SECONDS": envint("QUIVER_EXPIRY_CHECK_SECONDS", 60, minimum=1),
    "DELAY_SCAN_MAX_SLEEP_MS": envint("QUIVER_DELAY_SCAN_MAX_SLEEP_MS", 100, minimum=5, maximum=1000),
    # Lag alerts (console/alerts): how often beat checks the groups' thresholds, and the
    # webhook every alert is posted to (a group's own webhook overrides it; "" = none).
    "ALERT_CHECK_SECONDS": envint("QUIVER_ALERT_CHECK_SECONDS", 30, minimum=1),
    "ALERT_WEBHOOK_URL": envstr("QUIVER_ALERT_WEBHOOK_URL", ""),
    "ALERT_WEBHOOK_TIMEOUT_SECONDS": envint("QUIVER_ALERT_WEBHOOK_TIMEOUT_SECONDS", 3, minimum=1),
    "ALERT_WEBHOOK_ATTEMPTS": envint("QUIVER_ALERT_WEBHOOK_ATTEMPTS", 2, minimum=1, maximum=10),
    # Replication alerts and the dashboard's broker sets: a slave further behind its master
    # than this (bytes of commit log, or seconds since the oldest byte it lacks was stored)
    # is flagged and alerted on, as is a slave whose link is down (0 = that limit is off).
    "REPLICATION_MAX_BEHIND_BYTES": envint("QUIVER_REPLICATION_MAX_BEHIND_BYTES", 64 << 20, minimum=0),
    "REPLICATION_MAX_BEHIND_SECONDS": envint("QUIVER_REPLICATION_MAX_BEHIND_SECONDS", 30, minimum=0),
    # Seconds each broker call of a job may take before the broker is reported down.
    "BROKER_TIMEOUT_SECONDS": envint("QUIVER_BROKER_TIMEOUT_SECONDS", 5, minimum=1),
    # TLS to the nameservers and brokers (needed when they run with tlsMode = enforcing):
    # the console, the Celery jobs and the Spark reports connect with it.  The servers are
    # checked against QUIVER_TLS_TRUST_CERT_PATH when set; a client certificate is sent when
    # QUIVER_TLS_CERT_PATH and QUIVER_TLS_KEY_PATH are set.
    "TLS_ENABLE": envbool(TLS_ENABLE_ENV, False),
    "TLS_TRUST_CERT_PATH": tls_path(TLS_TRUST_CERT_PATH_ENV),
    "TLS_CERT_PATH": tls_path(TLS_CERT_PATH_ENV),
    "TLS_KEY_PATH": tls_path(TLS_KEY_PATH_ENV),
    # A broker the nameservers stop listing is still tried and reported down for this long.
    "FORGET_BROKER_SECONDS": envint("QUIVER_FORGET_BROKER_SECONDS", 3600, minimum=0),
    # Spark reports (console/reports): where runs write (any Hadoop path when Spark runs on a
    # cluster), how often beat runs both reports (minutes, 0 = never) over which window.
    "REPORTS_DIR": envstr("QUIVER_REPORTS_DIR", str(DATA_DIR / "reports")),
    # Where Spark reads the offset history from: the history directory itself by default;
    # on a Spark cluster, the Hadoop path it is copied or synced to (hdfs://..., s3a://...).
    "REPORTS_HISTORY_PATH": envstr("QUIVER_REPORTS_HISTORY_PATH", ""),
    "REPORT_SCHEDULE_MINUTES": envint("QUIVER_REPORT_SCHEDULE_MINUTES", 60, minimum=0),
    "REPORT_WINDOW_MINUTES": envint("QUIVER_REPORT_WINDOW_MINUTES", 0, minimum=0),  # 0: the period
    "REPORT_TIMEOUT_SECONDS": envint("QUIVER_REPORT_TIMEOUT_SECONDS", 3600, minimum=10),
    "SPARK_MASTER": envstr("SPARK_MASTER", "local[*]"),
    # How a cluster's executors get the reports' Python packages (spark_reports/executorenv.py):
    # checked here so that a bad value stops the platform at start, not each report.
    "SPARK_EXECUTOR_ENV": spark_executor_env(),
    # Seconds the warm Spark session waits for the next report before it exits and gives
    # its memory back (console/reports/warm.py); 0: every report starts Spark afresh.
    "SPARK_WARM_SECONDS": envint("QUIVER_SPARK_WARM_SECONDS", 600, minimum=0),
    # CPU niceness of long work (the long-work worker under ``up``, and every Spark report):
    # it yields the CPU to the broker and the maintenance worker whenever they need it.
    "LONG_WORK_NICE": envint("QUIVER_LONG_WORK_NICE", 10, minimum=0, maximum=19),
}

# Redis carries Celery's messages and results (and, from the console, Channels' events).
REDIS_URL = envstr("REDIS_URL", "redis://127.0.0.1:6379/9")  # Quiver's own database (redisserver.py)
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True  # long tasks keep theirs (console/core/longtasks.py)
CELERY_RESULT_EXPIRES = 7 * 24 * 3600
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
# Two classes of work, two queues, two workers (``up`` starts both): time-critical jobs
# (delay scan, offset persistence, file expiry, lag alerts) on "maintenance", long work
# (reports, DLQ redrive: the tasks named long_*) on "long".  console/celery.py routes every
# task by that rule; a worker takes one task at a time per slot, so a slot never holds a
# queued task behind a running one.
CELERY_TASK_DEFAULT_QUEUE = "maintenance"
CELERY_TASK_ROUTES = ("console.celery.route_task",)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1

INSTALLED_APPS = [
    # daphne first: it replaces runserver with its ASGI server.
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "console.core",
    "console.maintenance",
    "console.dlq",
    "console.audit",
    "console.topics",
    "console.groups",
    "console.alerts",
    "console.messages",
    "console.reports",
    "console.clusters",
    "nameserver",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files, compressed (gzip) and with cache headers: see STATIC_ROOT below.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Pages and API answers gzipped for a browser that accepts it (static files never reach
    # here: WhiteNoise answers them above).  Django's own middleware pads each answer with
    # random bytes against BREACH, and the CSRF token is masked per answer.
    "django.middleware.gzip.GZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_database_url = envstr("DATABASE_URL", "")
DATABASES = {
    "default": database_from_url(_database_url)
    if _database_url
    else {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA_DIR / "console.sqlite3"}
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(str(DATABASES["default"]["NAME"])).parent.mkdir(parents=True, exist_ok=True)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

LOGIN_URL = "core:login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "core:login"

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"
# WhiteNoise serves static files. ``manage.py up`` runs collectstatic into STATIC_ROOT first,
# which writes a gzip copy of each file beside it (CompressedStaticFilesStorage): those are
# served to browsers that accept them, with Cache-Control for WHITENOISE_MAX_AGE seconds
# (and Last-Modified/ETag to revalidate). A console started without collectstatic (tests,
# runserver) serves the files from the project's static/ directory as they are.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = not (STATIC_ROOT / "console").is_dir()
WHITENOISE_MAX_AGE = envint("QUIVER_STATIC_MAX_AGE", 3600)

# Events cross processes through Redis when the platform gives one (``up`` always does);
# a console started alone, or under test, keeps them in its own process.
CHANNEL_LAYERS = {
    # channels-redis, quiet when a socket idles or Redis is slow or away (console/core/redis.py).
    "default": {"BACKEND": "console.core.redis.ChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}
    if "REDIS_URL" in os.environ
    else {"BACKEND": "channels.layers.InMemoryChannelLayer"}
}

REST_FRAMEWORK = {
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    # Broker refusals become 4xx/5xx with the broker's code and remark (console/core/api_errors.py).
    "EXCEPTION_HANDLER": "console.core.api_errors.handle",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # ``?format=`` belongs to our endpoints (exports choose csv or jsonl with it).
    "URL_FORMAT_OVERRIDE": None,
}

# The OpenAPI schema at /api/schema/ and interactive docs at /api/docs/, served from the
# vendored Swagger UI (drf-spectacular-sidecar): the console never loads from a CDN.
SPECTACULAR_SETTINGS = {
    "TITLE": "Quiver console API",
    "DESCRIPTION": "Manage RocketMQ-compatible clusters: brokers, topics, groups, offsets, messages, DLQ.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
