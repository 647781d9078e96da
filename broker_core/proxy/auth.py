"""Who a RocketMQ 5 client is: its ``authorization`` header checked against plain_acl.yml.

The v5 clients sign each call: ``authorization: MQv2-HMAC-SHA1 Credential=<accessKey>,
SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1 of the x-mq-date-time header with
the secret key>``.  With ``enableACL`` the proxy checks it against the accounts of the same
plain_acl.yml the brokers use (re-read when the file changes); what an account may do is
the brokers' to decide, when the proxy signs its requests to them as that account
(``enableAclRpcHookForClusterMode``).
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Iterable
from hashlib import sha1
from pathlib import Path

from broker_core.model.acl import Account, parse_acl

log = logging.getLogger(__name__)

_HEADER = re.compile(
    r"^MQv2-HMAC-SHA1\s+Credential=(?P<ak>[^,\s]*),\s*SignedHeaders=(?P<signed>[^,\s]*),\s*Signature=(?P<sig>\S*)$"
)


class Unauthorized(Exception):
    """The call's credentials are missing, unknown or wrongly signed (the sentence says which)."""


class Authenticator:
    """Checks calls against one plain_acl.yml."""

    def __init__(self, acl_file: Path) -> None:
        self.acl_file = acl_file
        self._mtime = -1.0
        self._accounts: dict[str, Account] = {}
        self._reload()

    def _reload(self) -> None:
        try:
            mtime = self.acl_file.stat().st_mtime
        except OSError as exc:
            log.error("cannot read %s (%s): the accounts read before are kept", self.acl_file, exc)
            return
        if mtime == self._mtime:
            return
        try:
            _white, self._accounts = parse_acl(self.acl_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.error("%s is unusable (%s): the accounts read before are kept", self.acl_file, exc)
            return
        self._mtime = mtime

    def authenticate(self, metadata: Iterable[tuple[str, str | bytes]]) -> Account:
        """The account whose secret signed this call; ``Unauthorized`` when none did."""
        self._reload()
        headers = {key.lower(): value for key, value in metadata if isinstance(value, str)}
        header = headers.get("authorization", "")
        match = _HEADER.match(header.strip())
        if match is None:
            raise Unauthorized("the call carries no MQv2-HMAC-SHA1 authorization header")
        access_key = match["ak"]
        if not access_key:
            raise Unauthorized("the call is signed with no access key: give the client credentials")
        account = self._accounts.get(access_key)
        if account is None:
            raise Unauthorized(f"no account {access_key!r}")
        signed = headers.get(match["signed"].lower(), "")
        expected = hmac.new(account.secret_key.encode(), signed.encode(), sha1).hexdigest()
        if not signed or not hmac.compare_digest(expected, match["sig"].lower()):
            raise Unauthorized(f"the signature of account {access_key!r} does not match its secret")
        return account
