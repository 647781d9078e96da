"""RocketMQ's ``plain_acl.yml``: its accounts and permissions, as the broker enforces them
(``broker_core.broker.acl``) and the gRPC proxy authenticates against them
(``broker_core.proxy``).

Permissions are ``DENY``, ``PUB``, ``SUB`` or ``PUB|SUB``; a resource not listed gets the
account's ``defaultTopicPerm``/``defaultGroupPerm`` (DENY when unset).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

import yaml

from broker_core.topics import RETRY_GROUP_TOPIC_PREFIX

ACL_FILE = "plain_acl.yml"
DENY, PUB, SUB = 0, 1, 2
_PERMS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "ANY": PUB | SUB}


def parse_perm(text: object) -> int:
    """``"PUB|SUB"`` -> PUB | SUB; anything unknown is DENY (as RocketMQ reads it)."""
    return _PERMS.get(str(text).strip().upper().replace(" ", ""), DENY)


def address_matches(patterns: list[str], address: str) -> bool:
    ip = address.rpartition(":")[0].strip("[]") if ":" in address else address
    return any(pattern and fnmatch.fnmatch(ip, pattern.strip()) for pattern in patterns)


@dataclass
class Account:
    access_key: str
    secret_key: str
    white_remote_address: list[str] = field(default_factory=list)
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    topic_perms: dict[str, int] = field(default_factory=dict)
    group_perms: dict[str, int] = field(default_factory=dict)

    def topic_allowed(self, topic: str, needed: int) -> bool:
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # a retry topic belongs to its group
            return self.group_allowed(topic[len(RETRY_GROUP_TOPIC_PREFIX) :], SUB)
        granted = self.topic_perms.get(topic, self.default_topic_perm)
        return granted & needed == needed and granted != DENY

    def group_allowed(self, group: str, needed: int) -> bool:
        granted = self.group_perms.get(group, self.default_group_perm)
        return granted & needed == needed and granted != DENY


def perm_table(entries: Any) -> dict[str, int]:
    table = {}
    for entry in entries or []:
        name, _, perm = str(entry).partition("=")
        if name.strip():
            table[name.strip()] = parse_perm(perm)
    return table


def address_list(value: Any) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return [str(v).strip() for v in value if str(v).strip()]


def parse_acl(text: str) -> tuple[list[str], dict[str, Account]]:
    """Parse plain_acl.yml; raise ValueError saying what is wrong."""
    doc = yaml.safe_load(text) or {}
    if not isinstance(doc, dict):
        raise ValueError("plain_acl.yml must be a mapping")
    accounts: dict[str, Account] = {}
    for raw in doc.get("accounts") or []:
        if not isinstance(raw, dict) or not raw.get("accessKey") or not raw.get("secretKey"):
            raise ValueError(f"an account needs accessKey and secretKey: {raw!r}")
        account = Account(
            access_key=str(raw["accessKey"]),
            secret_key=str(raw["secretKey"]),
            white_remote_address=address_list(raw.get("whiteRemoteAddress")),
            admin=bool(raw.get("admin", False)),
            default_topic_perm=parse_perm(raw.get("defaultTopicPerm", "DENY")),
            default_group_perm=parse_perm(raw.get("defaultGroupPerm", "DENY")),
            topic_perms=perm_table(raw.get("topicPerms")),
            group_perms=perm_table(raw.get("groupPerms")),
        )
        accounts[account.access_key] = account
    return address_list(doc.get("globalWhiteRemoteAddresses")), accounts


def perm_name(perm: int) -> str:
    return {DENY: "DENY", PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB"}.get(perm, "DENY")


def account_to_json(account: Account, *, with_secret: bool = True) -> dict[str, Any]:
    """An account as plain_acl.yml (and GET_BROKER_CLUSTER_ACL_CONFIG) writes it."""
    data: dict[str, Any] = {
        "accessKey": account.access_key,
        "whiteRemoteAddress": ",".join(account.white_remote_address),
        "admin": account.admin,
        "defaultTopicPerm": perm_name(account.default_topic_perm),
        "defaultGroupPerm": perm_name(account.default_group_perm),
        "topicPerms": [f"{t}={perm_name(p)}" for t, p in sorted(account.topic_perms.items())],
        "groupPerms": [f"{g}={perm_name(p)}" for g, p in sorted(account.group_perms.items())],
    }
    if with_secret:
        data["secretKey"] = account.secret_key
    return data
