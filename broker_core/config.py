"""Typed configuration for the engine's processes.

Each field is the snake_case of the RocketMQ property it mirrors (``mappedFileSizeCommitLog``
-> ``mapped_file_size_commit_log``) so a ``broker.conf`` maps across one to one; fields
Quiver invents carry their unit in the name.  Configs are frozen: build a new one with
``dataclasses.replace`` rather than mutating a running component's settings.
"""

from __future__ import annotations

import dataclasses
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from broker_core.errors import ConfigError
from broker_core.remoting.busypoll import DEFAULT_BUSY_POLL_MICROS, check_busy_poll_micros
from broker_core.remoting.tls import TlsServerSettings, outgoing_context

FlushDiskType = Literal["ASYNC_FLUSH", "SYNC_FLUSH"]

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """Parse RocketMQ's ``messageDelayLevel`` ("1s 5s 10s ... 2h") into milliseconds.

    Level L (1-based) is element L-1 of the result.
    """
    levels: list[int] = []
    for token in text.split():
        match = re.fullmatch(r"(\d+)([smhd])", token)
        if match is None:
            raise ConfigError(f"bad delay level {token!r} in messageDelayLevel {text!r}")
        levels.append(int(match.group(1)) * _UNIT_MS[match.group(2)])
    if not levels:
        raise ConfigError("messageDelayLevel is empty")
    return tuple(levels)


@dataclass(frozen=True)
class StoreConfig:
    """Settings of one broker's message store (RocketMQ ``MessageStoreConfig``)."""

    store_path_root_dir: str
    # Commit-log segment size in bytes (RocketMQ default 1 GiB; tests use small ones).
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    # Consume-queue file size in bytes: 300,000 entries of 20 bytes.
    mapped_file_size_consume_queue: int = 300_000 * 20
    # Index file: hash slots and entries per file.
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    message_index_enable: bool = True
    # Largest message body + properties + topic accepted, in bytes.
    max_message_size: int = 1024 * 1024 * 4
    flush_disk_type: FlushDiskType = "ASYNC_FLUSH"
    # ASYNC_FLUSH: the commit log is flushed this often (ms).
    flush_interval_commit_log: int = 500
    # SYNC_FLUSH: how long a put waits for its fsync before FLUSH_DISK_TIMEOUT (ms).
    sync_flush_timeout: int = 5000
    # Consume queues, index files and the checkpoint are flushed this often (ms).
    flush_interval_consume_queue: int = 1000
    # Commit-log segments older than this many hours may be deleted.
    file_reserved_time: int = 72
    # Hours of the day (";"-separated, "04" or "04;05") when expired files are deleted.
    delete_when: str = "04"
    # Expiry also runs whenever disk use passes this percentage.
    disk_max_used_space_ratio: int = 75
    # Above this ratio files are deleted even before they expire (RocketMQ: 0.85).
    disk_space_clean_forcibly_ratio: float = 0.85
    # Above this ratio the store refuses writes until space returns (RocketMQ: 0.90).
    disk_space_warning_level_ratio: float = 0.90
    # At most this many segments are deleted per expiry run (keeps a run short).
    delete_files_batch_max: int = 10
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    # Timer messages (store/timer.py): a send asking for a delivery time further ahead than
    # this many seconds is refused (RocketMQ's default: 3 days).
    timer_max_delay_sec: int = 3 * 24 * 3600
    # The broker's client-facing address: written as STOREHOST and used in msgIds.
    store_host: str = "127.0.0.1:10911"
    # Pre-create and pre-touch the next commit-log segment in the background.
    warm_mapped_file_enable: bool = True
    # Pull limits: at most this many messages / bytes in one read.
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mapped_file_size_commit_log < 4096:
            raise ConfigError("mappedFileSizeCommitLog must be at least 4096 bytes")
        if self.mapped_file_size_consume_queue <= 0 or self.mapped_file_size_consume_queue % 20:
            raise ConfigError("mappedFileSizeConsumeQueue must be a positive multiple of 20")
        if self.flush_disk_type not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            raise ConfigError(
                f"flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flush_disk_type!r}"
            )
        if self.max_hash_slot_num <= 0 or self.max_index_num <= 0:
            raise ConfigError("maxHashSlotNum and maxIndexNum must be positive")
        parse_delay_levels(self.message_delay_level)
        if self.timer_max_delay_sec <= 0:
            raise ConfigError("timerMaxDelaySec must be a positive number of seconds")
        for hour in self.delete_when.split(";"):
            if not hour.strip().isdigit() or not 0 <= int(hour) <= 23:
                raise ConfigError(
                    f"deleteWhen must be hours 00-23 separated by ';', not {self.delete_when!r}"
                )

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        """Delay of each level in milliseconds (level L is index L-1)."""
        return parse_delay_levels(self.message_delay_level)

    @property
    def root(self) -> Path:
        return Path(self.store_path_root_dir)

    @classmethod
    def from_properties(cls, props: dict[str, str], **overrides: Any) -> StoreConfig:
        """Build from RocketMQ-style camelCase properties (e.g. a parsed broker.conf).

        Unknown keys are kept in ``extra`` so other components can read them.
        """
        known = {f.name: f for f in dataclasses.fields(cls) if f.name != "extra"}
        kwargs: dict[str, Any] = {}
        extra: dict[str, str] = {}
        for key, raw in props.items():
            name = camel_to_snake(key)
            spec = known.get(name)
            if spec is None:
                extra[key] = raw
                continue
            kwargs[name] = _coerce(key, raw, spec.type)
        kwargs.update(overrides)
        return cls(extra=extra, **kwargs)


def camel_to_snake(name: str) -> str:
    """``mappedFileSizeCommitLog`` -> ``mapped_file_size_commit_log``, ``brokerIP1`` -> ``broker_ip1``."""
    # An acronym is one word: brokerIP1 -> broker_ip1, but HTTPServer -> http_server.
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


# Keys whose RocketMQ spelling snake-casing cannot restore.
_CAMEL_EXCEPTIONS = {"broker_ip1": "brokerIP1", "broker_ip2": "brokerIP2"}


def snake_to_camel(name: str) -> str:
    """``mapped_file_size_commit_log`` -> ``mappedFileSizeCommitLog`` (``broker_ip1`` -> ``brokerIP1``)."""
    if name in _CAMEL_EXCEPTIONS:
        return _CAMEL_EXCEPTIONS[name]
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def config_properties(config: Any) -> dict[str, str]:
    """A config dataclass as RocketMQ-style properties (what GET_BROKER_CONFIG answers).

    Values are written as a broker.conf would spell them (booleans ``true``/``false``);
    a StoreConfig's ``extra`` keys are kept as they came.  A secret (``SECRET_FIELDS``) that
    is set shows as ``******``: whoever may read the settings may not read it.
    """
    props: dict[str, str] = {}
    for spec in dataclasses.fields(config):
        value = getattr(config, spec.name)
        if spec.name == "extra":
            props.update({str(k): str(v) for k, v in value.items()})
            continue
        if spec.name in SECRET_FIELDS and value:
            value = MASKED
        props[snake_to_camel(spec.name)] = str(value).lower() if isinstance(value, bool) else str(value)
    return props


SECRET_FIELDS = frozenset({"tls_server_key_password", "tls_client_key_password"})
MASKED = "******"


def _coerce(key: str, raw: str, type_name: object) -> Any:
    text = str(raw).strip()
    kind = str(type_name)
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
    except ValueError as exc:
        raise ConfigError(f"{key}={raw!r} is not a valid {kind}") from exc
    return text


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a RocketMQ-style config file: ``key = value`` (or ``key: value``) lines.

    Blank lines and lines starting with ``#`` or ``!`` are skipped.  Raises ConfigError
    naming the line for anything else that is not a key/value pair.
    """
    props: dict[str, str] = {}
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if match is None:
            raise ConfigError(f"{path}:{number}: expected 'key = value', got {raw!r}")
        props[match.group(1)] = match.group(2).strip()
    return props


def _check_server_protection(config: NamesrvConfig | BrokerConfig) -> None:
    """Validate the remoting server's self-protection settings (both servers have them)."""
    if not 0 < config.write_buffer_low_water_mark <= config.write_buffer_high_water_mark:
        raise ConfigError(
            "writeBufferLowWaterMark must be positive and at most writeBufferHighWaterMark, not "
            f"{config.write_buffer_low_water_mark} (high: {config.write_buffer_high_water_mark})"
        )
    if config.server_partial_frames_max_bytes < config.max_frame_size_bytes:
        raise ConfigError(
            f"serverPartialFramesMaxBytes ({config.server_partial_frames_max_bytes}) must be at least "
            f"maxFrameSizeBytes ({config.max_frame_size_bytes}), or a frame of the largest size never fits"
        )
    if config.server_partial_frame_timeout_millis <= 0:
        raise ConfigError("serverPartialFrameTimeoutMillis must be positive")
    check_busy_poll_micros("serverBusyPollMicros", config.server_busy_poll_micros)


@dataclass(frozen=True)
class TlsConfig:
    """A server's TLS settings (RocketMQ's ``tls.server.*`` and ``tls.enable``), shared by the
    nameserver's and the broker's configs; the rules are ``remoting.tls``'s."""

    # disabled (plain only), permissive (TLS and plain on one port) or enforcing (TLS only).
    tls_mode: str = "disabled"
    # The server's certificate chain and key (PEM), needed unless disabled.
    tls_server_cert_path: str = ""
    tls_server_key_path: str = ""
    tls_server_key_password: str = ""
    # Certificates that sign client certificates, and whether to ask for one
    # (none, optional, require).
    tls_server_trust_cert_path: str = ""
    tls_server_need_client_auth: str = "none"

    def tls_server(self) -> TlsServerSettings:
        return TlsServerSettings(
            self.tls_mode,
            self.tls_server_cert_path,
            self.tls_server_key_path,
            self.tls_server_key_password,
            self.tls_server_trust_cert_path,
            self.tls_server_need_client_auth,
        )


@dataclass(frozen=True)
class TlsClientConfig:
    """A server's own connections out over TLS (a broker to its nameservers, the proxy to
    the cluster): RocketMQ's ``tls.enable`` and ``tls.client.*``, shared by the broker's and
    the proxy's configs; the rules are ``remoting.tls.outgoing_context``'s."""

    tls_enable: bool = False
    # Check the servers against these certificates when given (else not checked, as
    # RocketMQ's clients), and show this certificate to servers that require one.
    tls_client_trust_cert_path: str = ""
    tls_client_cert_path: str = ""
    tls_client_key_path: str = ""
    tls_client_key_password: str = ""

    def tls_client(self) -> ssl.SSLContext | None:
        """The SSL context of the connections out (None: plain, tlsEnable off).  Raises
        ConfigError for a file that cannot be loaded or a path given without tlsEnable."""
        return outgoing_context(
            self.tls_enable,
            trust_cert_path=self.tls_client_trust_cert_path,
            cert_path=self.tls_client_cert_path,
            key_path=self.tls_client_key_path,
            key_password=self.tls_client_key_password,
        )


@dataclass(frozen=True)
class NamesrvConfig(TlsConfig):
    """Settings of one nameserver (RocketMQ ``NamesrvConfig`` + its server config)."""

    listen_port: int = 9876
    # Quiver: the address to bind (RocketMQ binds every interface).
    listen_host: str = "127.0.0.1"
    # How often brokers that stopped registering are looked for (ms).
    scan_not_active_broker_interval: int = 10_000
    # A broker silent this long is dropped (RocketMQ: BROKER_CHANNEL_EXPIRED_TIME, ms).
    broker_channel_expired_time: int = 120_000
    # Largest frame accepted from a client, in bytes.
    max_frame_size_bytes: int = 16 * 1024 * 1024
    # A connection silent this long (and with no request in progress) is closed.
    server_channel_max_idle_time_seconds: int = 120
    # Reading from a connection stops while more than this many bytes of answers to it are
    # unsent (its peer is not reading them) and starts again below the low-water mark.
    write_buffer_high_water_mark: int = 256 * 1024
    write_buffer_low_water_mark: int = 64 * 1024
    # Quiver: the bytes partial frames may hold over every connection together; past it the
    # connections whose partial frames began first are closed.
    server_partial_frames_max_bytes: int = 64 * 1024 * 1024
    # Quiver: a frame must arrive whole this long (ms) after its first byte, or its
    # connection is closed (a peer dripping bytes would keep resetting the idle timer).
    server_partial_frame_timeout_millis: int = 30_000
    # Quiver: how long (µs) the server polls for the next request after each read before
    # it sleeps (``remoting.busypoll``; adaptive, 0 = never).
    server_busy_poll_micros: int = DEFAULT_BUSY_POLL_MICROS

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError(f"listenPort must be 0..65535, not {self.listen_port}")
        if self.server_channel_max_idle_time_seconds <= 0:
            raise ConfigError("serverChannelMaxIdleTimeSeconds must be positive")
        _check_server_protection(self)
        self.tls_server()  # refused at start with a sentence: a bad mode, a missing file
        if self.scan_not_active_broker_interval <= 0 or self.broker_channel_expired_time <= 0:
            raise ConfigError("scanNotActiveBrokerInterval and brokerChannelExpiredTime must be positive")

    @classmethod
    def from_properties(cls, props: dict[str, str], **overrides: Any) -> tuple[NamesrvConfig, list[str]]:
        """Build from camelCase properties; also return the keys that mean nothing here."""
        return _typed_from_properties(cls, props, overrides)


def _typed_from_properties(
    cls: Any, props: dict[str, str], overrides: dict[str, Any]
) -> tuple[Any, list[str]]:
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    unknown: list[str] = []
    for key, raw in props.items():
        spec = known.get(camel_to_snake(key))
        if spec is None:
            unknown.append(key)
            continue
        kwargs[spec.name] = _coerce(key, raw, spec.type)
    kwargs.update(overrides)
    return cls(**kwargs), unknown


BrokerRole = Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"]
MaintenanceMode = Literal["auto", "true", "false"]
MAINTENANCE_MODES: tuple[MaintenanceMode, ...] = ("auto", "true", "false")


@dataclass(frozen=True)
class BrokerConfig(TlsConfig, TlsClientConfig):
    """Settings of one broker (RocketMQ ``BrokerConfig`` + its server config).

    The store's settings live in ``StoreConfig``; ``load_broker_config`` reads both from one
    ``broker.conf``.
    """

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    # The address clients are told to use (STOREHOST, routes).
    broker_ip1: str = "127.0.0.1"
    listen_port: int = 10911
    # Nameserver addresses, ";"-separated.
    namesrv_addr: str = ""
    broker_role: BrokerRole = "ASYNC_MASTER"
    # Off unless asked for (RocketMQ defaults to on; production configs turn it off).
    auto_create_topic_enable: bool = False
    # RocketMQ's message-trace topic, created by the broker when enabled (clients with
    # enableMsgTrace write their trace records there; the console reads them).
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    auto_create_subscription_group: bool = True
    # Refuse a send whose message type (broker_core.model.messagetype) is not its topic's
    # message.type.  RocketMQ checks at its proxy (on there) and never at the broker: off.
    enable_topic_message_type_check: bool = False
    # RocketMQ: whether a topic may be given message.type = MIXED.
    enable_mixed_message_type: bool = False
    default_topic_queue_nums: int = 8
    # PERM_READ | PERM_WRITE
    broker_permission: int = 6
    acl_enable: bool = False
    # Re-register with every nameserver this often (ms).
    register_name_server_period: int = 30_000
    # Quiver: who runs delay scan, file expiry and offset persistence (broker/maintenance.py):
    # ``auto``, the broker's own timers whenever the platform's passes stop coming; ``true``,
    # always the broker's timers; ``false``, never (the platform must drive them).
    standalone_maintenance: MaintenanceMode = "auto"
    # Quiver: in ``auto``, how long after the platform's last pass of a job the broker's own
    # timer takes it over (ms).  The platform may ask for a longer lease with each pass.
    delay_scan_lease_millis: int = 1_000
    # Quiver: in ``auto``, a delayed message the platform's scans left this long past its
    # time (ms) is delivered by the broker at once, lease or not (the platform is slow).
    delay_scan_overdue_millis: int = 200
    offset_persistence_lease_millis: int = 15_000
    file_expiry_lease_millis: int = 180_000
    # Transactions: first check after (ms), check interval (ms), most checks.
    transaction_time_out: int = 6_000
    transaction_check_interval: int = 60_000
    transaction_check_max: int = 15
    long_polling_enable: bool = True
    # SQL92 property filters (``MessageSelector.bySql``): off by default, as in RocketMQ;
    # off, a SQL92 subscription is refused at CHECK_CLIENT_CONFIG and on every pull.
    enable_property_filter: bool = False
    # Whether a SQL92 filter applies to the group's retry topic too (RocketMQ: off).
    filter_support_retry: bool = False
    # Without long polling, a pull that finds nothing is held this long (ms), not woken early.
    short_polling_time_mills: int = 1_000
    max_frame_size_bytes: int = 16 * 1024 * 1024
    # Quiver: a client without a heartbeat this long is dropped and its connection closed
    # (RocketMQ fixes 120 s), looked for this often (ms).
    client_channel_expired_time: int = 120_000
    client_housekeeping_interval: int = 10_000
    # A connection silent this long (and with no request in progress) is closed.
    server_channel_max_idle_time_seconds: int = 120
    # Reading from a connection stops while more than this many bytes of answers to it are
    # unsent (its peer is not reading them) and starts again below the low-water mark.
    write_buffer_high_water_mark: int = 256 * 1024
    write_buffer_low_water_mark: int = 64 * 1024
    # Quiver: the bytes partial frames may hold over every connection together; past it the
    # connections whose partial frames began first are closed.
    server_partial_frames_max_bytes: int = 64 * 1024 * 1024
    # Quiver: a frame must arrive whole this long (ms) after its first byte, or its
    # connection is closed (a peer dripping bytes would keep resetting the idle timer).
    server_partial_frame_timeout_millis: int = 30_000
    # Quiver: how long (µs) the server polls for the next request after each read before
    # it sleeps (``remoting.busypoll``; adaptive, 0 = never).
    server_busy_poll_micros: int = DEFAULT_BUSY_POLL_MICROS

    # Replication (RocketMQ 4.x master/slave, ``broker_core.ha``).  The port a master takes
    # its slaves on: -1 means listenPort + 1 (RocketMQ's default), or any free port when
    # listenPort is 0.
    ha_listen_port: int = -1
    # A slave's master, "host:haPort"; empty: the one the nameserver names on registration.
    ha_master_address: str = ""
    # A slave reports its offset at least this often (ms); a master sends a heartbeat
    # frame when it has nothing to send for as long.
    ha_send_heartbeat_interval: int = 5_000
    # A link silent this long (ms) is closed (and a slave connects again).
    ha_housekeeping_interval: int = 20_000
    # The most bytes a master sends a slave in one frame (RocketMQ's default is 32 KiB;
    # larger frames cost fewer round trips when a slave catches up).
    ha_transfer_batch_size: int = 256 * 1024
    # SYNC_MASTER: a slave further behind than this (bytes) does not count as in sync, and
    # a send answers SLAVE_NOT_AVAILABLE at once rather than wait for it.
    ha_max_gap_not_in_sync: int = 256 * 1024 * 1024
    # Consumers far behind are sent to a slave (suggestWhichBrokerId) when this is on.
    slave_read_enable: bool = False
    # "Far behind": the bytes between a pull's position and the log's end exceed this
    # percentage of the machine's memory.
    access_message_in_memory_max_ratio: float = 40

    def __post_init__(self) -> None:
        if self.broker_id < 0:
            raise ConfigError(f"brokerId must be 0 (master) or positive, not {self.broker_id}")
        self.tls_server()
        self.tls_client()  # refused at start: a file that cannot be loaded, a setting without tlsEnable
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError(f"listenPort must be 0..65535, not {self.listen_port}")
        if self.broker_role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            raise ConfigError(
                f"brokerRole must be ASYNC_MASTER, SYNC_MASTER or SLAVE, not {self.broker_role!r}"
            )
        # broker.conf spells booleans true/false; Python callers may pass a bool.
        mode = str(self.standalone_maintenance).strip().lower()
        if mode not in MAINTENANCE_MODES:
            raise ConfigError(
                f"standaloneMaintenance must be auto, true or false, not {self.standalone_maintenance!r}"
            )
        object.__setattr__(self, "standalone_maintenance", mode)
        for key, lease in (
            ("delayScanLeaseMillis", self.delay_scan_lease_millis),
            ("delayScanOverdueMillis", self.delay_scan_overdue_millis),
            ("offsetPersistenceLeaseMillis", self.offset_persistence_lease_millis),
            ("fileExpiryLeaseMillis", self.file_expiry_lease_millis),
        ):
            if lease <= 0:
                raise ConfigError(f"{key} must be positive, not {lease}")
        if not 0 <= self.broker_permission <= 15:
            raise ConfigError(f"brokerPermission must be 0..15 (PERM_* bits), not {self.broker_permission}")
        if not 1 <= self.default_topic_queue_nums <= 1024:
            raise ConfigError(f"defaultTopicQueueNums must be 1..1024, not {self.default_topic_queue_nums}")
        for key, value in (
            ("transactionTimeOut", self.transaction_time_out),
            ("transactionCheckInterval", self.transaction_check_interval),
            ("registerNameServerPeriod", self.register_name_server_period),
        ):
            if value <= 0:
                raise ConfigError(f"{key} must be positive, not {value}")
        if self.transaction_check_max < 0:
            raise ConfigError(f"transactionCheckMax must not be negative, not {self.transaction_check_max}")
        if self.short_polling_time_mills < 0:
            raise ConfigError(
                f"shortPollingTimeMills must not be negative, not {self.short_polling_time_mills}"
            )
        if self.client_channel_expired_time <= 0 or self.client_housekeeping_interval <= 0:
            raise ConfigError("clientChannelExpiredTime and clientHousekeepingInterval must be positive")
        if self.server_channel_max_idle_time_seconds <= 0:
            raise ConfigError("serverChannelMaxIdleTimeSeconds must be positive")
        _check_server_protection(self)
        _check_replication(self)

    @property
    def is_slave(self) -> bool:
        return self.broker_role == "SLAVE"

    @property
    def ha_port(self) -> int:
        """The HA port to listen on (0: any free port)."""
        if self.ha_listen_port >= 0:
            return self.ha_listen_port
        return self.listen_port + 1 if self.listen_port else 0

    @property
    def namesrv_addrs(self) -> list[str]:
        return [addr.strip() for addr in self.namesrv_addr.split(";") if addr.strip()]

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"


def _check_replication(config: BrokerConfig) -> None:
    """Refuse a role and id that disagree, and replication settings that cannot work."""
    if config.broker_role == "SLAVE" and config.broker_id == 0:
        raise ConfigError("brokerRole = SLAVE needs a brokerId above 0 (brokerId 0 is the master)")
    if config.broker_role != "SLAVE" and config.broker_id != 0:
        raise ConfigError(
            f"brokerId = {config.broker_id} is a slave's id: set brokerRole = SLAVE, "
            f"or brokerId = 0 for a {config.broker_role}"
        )
    if not -1 <= config.ha_listen_port <= 65535:
        raise ConfigError(f"haListenPort must be 0..65535, not {config.ha_listen_port}")
    if config.ha_master_address and ":" not in config.ha_master_address:
        raise ConfigError(f"haMasterAddress must be host:port, not {config.ha_master_address!r}")
    for key, value in (
        ("haSendHeartbeatInterval", config.ha_send_heartbeat_interval),
        ("haHousekeepingInterval", config.ha_housekeeping_interval),
        ("haTransferBatchSize", config.ha_transfer_batch_size),
        ("haMaxGapNotInSync", config.ha_max_gap_not_in_sync),
    ):
        if value <= 0:
            raise ConfigError(f"{key} must be positive, not {value}")
    if not 0 < config.access_message_in_memory_max_ratio <= 100:
        raise ConfigError(
            "accessMessageInMemoryMaxRatio must be a percentage above 0, at most 100, "
            f"not {config.access_message_in_memory_max_ratio}"
        )


@dataclass(frozen=True)
class UnsupportedSetting:
    """A broker.conf key Quiver parses but does not act on yet.

    ``honoured`` is the one value Quiver behaves as (None: it acts on no value); a config
    that sets anything else is warned at start that ``effect`` is what happens instead.
    """

    key: str
    honoured: str | None
    effect: str


# The one list of BrokerConfig / StoreConfig keys that are parsed but not acted on; every
# other field is read by the broker or its store.  ``unsupported_settings`` turns it into
# the start-time warnings.
UNSUPPORTED_SETTINGS: tuple[UnsupportedSetting, ...] = ()


def unsupported_settings(broker: BrokerConfig, store: StoreConfig) -> list[str]:
    """One warning per setting of ``broker``/``store`` that Quiver parses but ignores, e.g.
    "brokerRole = SLAVE is not supported yet: this broker runs as a master ...".

    A default value (what Quiver does anyway) gives no warning.
    """
    props = {**config_properties(store), **config_properties(broker)}
    return [
        f"{setting.key} = {props[setting.key]} is not supported yet: {setting.effect}"
        for setting in UNSUPPORTED_SETTINGS
        if setting.key in props and props[setting.key] != setting.honoured
    ]


# Broker settings read afresh on every use, so UPDATE_BROKER_CONFIG can change them live.
LIVE_BROKER_KEYS = frozenset(
    {
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "enableMixedMessageType",
        "enableTopicMessageTypeCheck",
        "brokerPermission",
        "longPollingEnable",
        "shortPollingTimeMills",
        "enablePropertyFilter",
        "filterSupportRetry",
        "transactionTimeOut",
        "transactionCheckInterval",
        "transactionCheckMax",
        "clientChannelExpiredTime",
    }
)


def update_live_broker_config(config: BrokerConfig, props: dict[str, str]) -> BrokerConfig:
    """Return ``config`` with ``props`` (RocketMQ key names) applied.

    Raises ConfigError naming the first key that is unknown, needs a restart, or has a
    bad value; then nothing is applied.
    """
    fields = {f.name: f for f in dataclasses.fields(BrokerConfig)}
    changes: dict[str, Any] = {}
    for key, raw in props.items():
        spec = fields.get(camel_to_snake(key))
        if spec is None:
            raise ConfigError(f"unknown broker setting {key!r}")
        if key not in LIVE_BROKER_KEYS:
            raise ConfigError(
                f"{key} cannot change while the broker runs (live: {', '.join(sorted(LIVE_BROKER_KEYS))})"
            )
        changes[spec.name] = _coerce(key, raw, spec.type)
    return dataclasses.replace(config, **changes)


# RocketMQ spells the IP keys brokerIP1/brokerIP2; snake-casing would make broker_ip1.
def load_broker_config(props: dict[str, str]) -> tuple[BrokerConfig, StoreConfig, list[str]]:
    """Split a parsed broker.conf into broker and store settings; return unknown keys too.

    ``storePathRootDir`` is required.  The store's host (STOREHOST, msgIds) is the broker's
    ``brokerIP1:listenPort``.
    """
    broker_fields = {f.name for f in dataclasses.fields(BrokerConfig)}
    store_fields = {f.name for f in dataclasses.fields(StoreConfig)} - {"extra"}
    broker_props: dict[str, str] = {}
    store_props: dict[str, str] = {}
    unknown: list[str] = []
    for key, value in props.items():
        name = camel_to_snake(key)
        if name in broker_fields:
            broker_props[key] = value
        elif name in store_fields:
            store_props[key] = value
        else:
            unknown.append(key)
    if "storePathRootDir" not in store_props:
        raise ConfigError("broker.conf must set storePathRootDir")
    broker, _ = _typed_from_properties(BrokerConfig, broker_props, {})
    store = StoreConfig.from_properties(store_props, store_host=broker.broker_addr)
    return broker, store, unknown
