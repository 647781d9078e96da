"""RocketMQ's proxy config file (``rmq-proxy.json``): the keys Quiver's proxy reads.

RocketMQ 5 ships ``conf/rmq-proxy.json``, a JSON object of ``ProxyConfig`` fields; an
operator's file works here as it is: the keys below are acted on, any other key is
reported at start and ignored, and a bad value stops the proxy with a sentence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker_core.config import TlsClientConfig
from broker_core.errors import ConfigError


@dataclass(frozen=True)
class ProxyConfig(TlsClientConfig):
    """Settings of one proxy (RocketMQ ``ProxyConfig``, cluster mode).  Its TLS to the
    cluster (``TlsClientConfig``: tlsEnable, tlsClient*) is needed when the servers run
    with tlsMode = enforcing."""

    # The cluster whose brokers the proxy serves, and the nameservers that know them.
    rocket_mq_cluster_name: str = "DefaultCluster"
    namesrv_addr: str = "127.0.0.1:9876"
    # Where RocketMQ 5 clients connect (0: any free port).
    grpc_server_port: int = 8081
    # Quiver: the address to bind (RocketMQ binds every interface).
    grpc_server_host: str = "127.0.0.1"
    # Only "cluster": the proxy in front of separate brokers.  ("local", a proxy inside a
    # broker process, is RocketMQ's other mode.)
    proxy_mode: str = "cluster"
    # Check the clients' signatures against the accounts of plain_acl.yml (RocketMQ 5.1's
    # ACL 1.0 in the proxy): ``plainAclFile``, else ``rocketmqHome``/conf/plain_acl.yml.
    enable_acl: bool = False
    plain_acl_file: str = ""
    rocketmq_home: str = ""
    # Sign the requests to the brokers as the client's account, so brokers with
    # aclEnable apply that account's permissions (RocketMQ's key; off by default there too).
    enable_acl_rpc_hook_for_cluster_mode: bool = False
    # Refuse a send whose message type is not its topic's message.type (RocketMQ's proxy: on).
    enable_topic_message_type_check: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.grpc_server_port <= 65535:
            raise ConfigError(f"grpcServerPort must be 0..65535, not {self.grpc_server_port}")
        if self.proxy_mode.lower() != "cluster":
            raise ConfigError(
                f"proxyMode = {self.proxy_mode!r} is not served: Quiver's proxy runs in cluster mode "
                "(in front of brokers it reaches through the nameservers); set proxyMode to cluster"
            )
        if not self.namesrv_addrs:
            raise ConfigError("namesrvAddr is empty: give the cluster's nameservers, e.g. 127.0.0.1:9876")
        self.tls_client()  # a file that cannot be loaded, or a setting without tlsEnable
        if self.enable_acl and not self.acl_file.is_file():
            raise ConfigError(
                f"enableACL is true but {self.acl_file} is not a file: set plainAclFile to the "
                "plain_acl.yml the brokers use (or rocketmqHome to the directory whose conf/ holds it)"
            )

    @property
    def acl_file(self) -> Path:
        if self.plain_acl_file:
            return Path(self.plain_acl_file).expanduser()
        return Path(self.rocketmq_home or ".").expanduser() / "conf" / "plain_acl.yml"

    @property
    def namesrv_addrs(self) -> list[str]:
        return [addr.strip() for addr in self.namesrv_addr.split(";") if addr.strip()]


# JSON key -> (field, type).  RocketMQ spells the cluster key "rocketMQClusterName".
_KEYS: dict[str, tuple[str, type]] = {
    "rocketMQClusterName": ("rocket_mq_cluster_name", str),
    "namesrvAddr": ("namesrv_addr", str),
    "grpcServerPort": ("grpc_server_port", int),
    "grpcServerHost": ("grpc_server_host", str),
    "proxyMode": ("proxy_mode", str),
    "enableACL": ("enable_acl", bool),
    "plainAclFile": ("plain_acl_file", str),
    "rocketmqHome": ("rocketmq_home", str),
    "enableAclRpcHookForClusterMode": ("enable_acl_rpc_hook_for_cluster_mode", bool),
    "enableTopicMessageTypeCheck": ("enable_topic_message_type_check", bool),
    "tlsEnable": ("tls_enable", bool),
    "tlsClientTrustCertPath": ("tls_client_trust_cert_path", str),
    "tlsClientCertPath": ("tls_client_cert_path", str),
    "tlsClientKeyPath": ("tls_client_key_path", str),
    "tlsClientKeyPassword": ("tls_client_key_password", str),
}


def load_proxy_config(path: str | Path | None) -> tuple[ProxyConfig, list[str]]:
    """The config in ``path`` (None: the defaults) and the keys it has that mean nothing here.

    Raises ConfigError naming the file and the key for anything that cannot be used.
    """
    if path is None:
        return ProxyConfig(), []
    try:
        data: Any = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable JSON file: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold a JSON object of proxy settings")
    kwargs: dict[str, Any] = {}
    unknown = []
    for key, value in data.items():
        spec = _KEYS.get(key)
        if spec is None:
            unknown.append(key)
            continue
        name, kind = spec
        if kind is bool:
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                value = value.strip().lower() == "true"
            if not isinstance(value, bool):
                raise ConfigError(f"{path}: {key} must be true or false, not {value!r}")
            kwargs[name] = value
            continue
        if kind is int and (isinstance(value, bool) or not isinstance(value, int | str)):
            raise ConfigError(f"{path}: {key} must be a number, not {value!r}")
        try:
            kwargs[name] = kind(value)
        except ValueError:
            raise ConfigError(f"{path}: {key} must be a number, not {value!r}") from None
    try:
        return ProxyConfig(**kwargs), unknown
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
