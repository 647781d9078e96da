"""ACL 1.0 on the broker: RocketMQ's ``plain_acl.yml`` accounts and request signatures.

With ``aclEnable = true`` every request is checked before its processor runs:

1. a client whose address matches ``globalWhiteRemoteAddresses`` passes;
2. otherwise its ``AccessKey`` must name an account (an empty key, which the C++ client
   sends without credentials, names none);
3. a client matching the account's ``whiteRemoteAddress`` skips the signature check,
   anyone else must sign the request with the account's secret (HMAC-SHA1, as the
   official clients do);
4. admin accounts may do anything; others need the resource permissions the request
   code implies: PUB on a topic to send, SUB on topic and group to pull, SUB on the group
   for offsets, heartbeats and send-backs; admin-only codes (topic and group changes,
   broker config) are refused.

Permissions are ``DENY``, ``PUB``, ``SUB`` or ``PUB|SUB``; a resource not listed gets the
account's ``defaultTopicPerm``/``defaultGroupPerm`` (DENY when unset).  The file lives in
the broker's config directory and is re-read when it changes.  A refusal is answered
NO_PERMISSION with the reason, and logged.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

from broker_core.model.acl import (
    ACL_FILE,
    PUB,
    SUB,
    Account,
    account_to_json,
    address_list,
    address_matches,
    parse_acl,
    parse_perm,
    perm_name,
    perm_table,
)
from broker_core.remoting import acl as signing
from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import CONSUMER_GROUP, SEND_V1_KEYS, SEND_V2_KEYS

log = logging.getLogger(__name__)

RELOAD_CHECK_SECONDS = 1.0

ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        # Quiver adds the other requests that change a broker's state for everyone.
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.TRIGGER_DELETE_FILES,
        RequestCode.QUIVER_RUN_MAINTENANCE_JOB,
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
    }
)


class PlainAcl:
    """The accounts of one broker, re-read when plain_acl.yml changes."""

    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / ACL_FILE
        self.global_white: list[str] = []
        self.accounts: dict[str, Account] = {}
        self._mtime: float | None = None
        self._checked = 0.0
        self.reload(force=True)

    def reload(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._checked < RELOAD_CHECK_SECONDS:
            return
        self._checked = now
        try:
            mtime = os.stat(self.path).st_mtime
        except FileNotFoundError:
            if self.accounts or self.global_white:
                log.warning("%s is gone: every request is refused until it returns", self.path)
            self.global_white, self.accounts, self._mtime = [], {}, None
            return
        if mtime == self._mtime and not force:
            return
        try:
            self.global_white, self.accounts = parse_acl(self.path.read_text(encoding="utf-8"))
        except (ValueError, yaml.YAMLError) as exc:
            log.error("%s is invalid, keeping the previous accounts: %s", self.path, exc)
            return
        self._mtime = mtime
        log.info("loaded %d ACL account(s) from %s", len(self.accounts), self.path)

    # -- changes over the protocol (RocketMQ 4's ACL admin requests) ------------------------

    def _write(self, global_white: list[str], accounts: dict[str, Account]) -> None:
        """Replace plain_acl.yml atomically (temp file + rename) and take it in at once."""
        doc = {
            "globalWhiteRemoteAddresses": global_white,
            "accounts": [account_to_json(a) for _, a in sorted(accounts.items())],
        }
        text = yaml.safe_dump(doc, sort_keys=False)
        parse_acl(text)  # never write what cannot be read back
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, self.path)
        self.reload(force=True)

    def upsert_account(self, fields: dict[str, str]) -> Account:
        """Create or update the account ``fields["accessKey"]`` (UPDATE_AND_CREATE_ACL_CONFIG).

        Fields left out keep their value on an update.  Raises ValueError on bad input.
        """
        self.reload(force=True)
        key = (fields.get("accessKey") or "").strip()
        if not key:
            raise ValueError("an account needs an accessKey")
        old = self.accounts.get(key)
        secret = (fields.get("secretKey") or (old.secret_key if old else "")).strip()
        if len(secret) < 6:
            raise ValueError("an account needs a secretKey of 6 characters or more")

        def pick(name: str, default: Any) -> Any:
            return fields[name] if fields.get(name) not in (None, "") else default

        account = Account(
            access_key=key,
            secret_key=secret,
            white_remote_address=address_list(
                pick("whiteRemoteAddress", ",".join(old.white_remote_address) if old else "")
            ),
            admin=str(pick("admin", old.admin if old else False)).lower() == "true",
            default_topic_perm=parse_perm(
                pick("defaultTopicPerm", perm_name(old.default_topic_perm) if old else "DENY")
            ),
            default_group_perm=parse_perm(
                pick("defaultGroupPerm", perm_name(old.default_group_perm) if old else "DENY")
            ),
            topic_perms=perm_table(fields["topicPerms"].split(","))
            if "topicPerms" in fields
            else (old.topic_perms if old else {}),
            group_perms=perm_table(fields["groupPerms"].split(","))
            if "groupPerms" in fields
            else (old.group_perms if old else {}),
        )
        self._write(self.global_white, {**self.accounts, key: account})
        return account

    def delete_account(self, access_key: str) -> bool:
        """Remove an account (DELETE_ACL_CONFIG); False when there was none."""
        self.reload(force=True)
        if access_key not in self.accounts:
            return False
        self._write(self.global_white, {k: a for k, a in self.accounts.items() if k != access_key})
        return True

    def set_global_white(self, addresses: list[str]) -> None:
        """Replace the addresses that need no account (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)."""
        self.reload(force=True)
        self._write(addresses, self.accounts)

    def check(self, request: RemotingCommand, remote_address: str) -> str | None:
        """Why ``request`` is refused, or None when it is allowed."""
        self.reload()
        if address_matches(self.global_white, remote_address):
            return None
        access_key = request.ext_fields.get(signing.ACCESS_KEY, "")
        if not access_key:
            return f"no AccessKey in the request from {remote_address}: ACL is enabled on this broker"
        account = self.accounts.get(access_key)
        if account is None:
            return f"no ACL account for AccessKey {access_key!r}"
        # A client on the account's white list needs no signature.
        white_listed = address_matches(account.white_remote_address, remote_address)
        if not white_listed and not signing.verify(request, account.secret_key):
            return f"the signature of AccessKey {access_key!r} does not match"
        if account.admin:
            return None
        return self._resource_problem(request, account)

    def _resource_problem(self, request: RemotingCommand, account: Account) -> str | None:
        code, fields = request.code, request.ext_fields
        who = account.access_key
        if code in ADMIN_CODES:
            return f"AccessKey {who!r} is not an admin account; request {code} needs one"
        if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            topic = fields.get(SEND_V1_KEYS.topic) or fields.get(SEND_V2_KEYS.topic, "")
            if not account.topic_allowed(topic, PUB):
                return f"AccessKey {who!r} may not send to topic {topic!r}"
        elif code == RequestCode.PULL_MESSAGE:
            topic, group = fields.get("topic", ""), fields.get(CONSUMER_GROUP, "")
            if not account.topic_allowed(topic, SUB):
                return f"AccessKey {who!r} may not consume topic {topic!r}"
            if not account.group_allowed(group, SUB):
                return f"AccessKey {who!r} may not consume as group {group!r}"
        elif code in (
            RequestCode.QUERY_CONSUMER_OFFSET,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP,
            RequestCode.CONSUMER_SEND_MSG_BACK,
            RequestCode.UNREGISTER_CLIENT,
        ):
            group = fields.get(CONSUMER_GROUP) or fields.get("group", "")
            if group and not account.group_allowed(group, SUB):
                return f"AccessKey {who!r} may not act for group {group!r}"
        elif code == RequestCode.HEART_BEAT and request.body:
            return self._heartbeat_problem(request.body, account)
        return None

    @staticmethod
    def _heartbeat_problem(body: bytes, account: Account) -> str | None:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None  # the heartbeat processor answers malformed bodies itself
        for consumer in data.get("consumerDataSet") or []:
            group = str(consumer.get("groupName", ""))
            if not account.group_allowed(group, SUB):
                return f"AccessKey {account.access_key!r} may not consume as group {group!r}"
            for sub in consumer.get("subscriptionDataSet") or []:
                topic = str(sub.get("topic", ""))
                if not account.topic_allowed(topic, SUB):
                    return f"AccessKey {account.access_key!r} may not subscribe to topic {topic!r}"
        return None
