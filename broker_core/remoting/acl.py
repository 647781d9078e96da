"""ACL 1.0 request signatures, as the C++ and Java clients compute them (reference §8).

Signature = Base64(HMAC-SHA1(key = secret key UTF-8,
                             data = the values of every extFields entry except ``Signature``,
                                    sorted by key, concatenated with no separator,
                                    followed by the raw body)).

Keys sort in byte order (Java ``String.compareTo`` for ASCII keys).  The C++ client signs
even without credentials: empty ``AccessKey``, empty secret; treat an empty ``AccessKey`` as
"no credentials".  Pure: no asyncio, no I/O.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

from broker_core.remoting.command import RemotingCommand

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
ONS_CHANNEL = "OnsChannel"


def sign(ext_fields: Mapping[str, str], body: bytes, secret_key: str) -> str:
    """Return the Base64 HMAC-SHA1 signature of ``ext_fields`` (minus ``Signature``) and ``body``."""
    content = "".join(ext_fields[key] for key in sorted(ext_fields) if key != SIGNATURE)
    mac = hmac.new(secret_key.encode(), content.encode(), hashlib.sha1)
    mac.update(body)
    return base64.b64encode(mac.digest()).decode("ascii")


def sign_request(cmd: RemotingCommand, access_key: str, secret_key: str) -> RemotingCommand:
    """Add ``AccessKey`` and ``Signature`` to ``cmd`` (in place), as the official clients do."""
    cmd.ext_fields = {key: str(value) for key, value in cmd.ext_fields.items()}
    cmd.ext_fields[ACCESS_KEY] = access_key
    cmd.ext_fields[SIGNATURE] = sign(cmd.ext_fields, cmd.body, secret_key)
    return cmd


def verify(cmd: RemotingCommand, secret_key: str) -> bool:
    """Return whether ``cmd`` carries a ``Signature`` that ``secret_key`` reproduces."""
    signature = cmd.ext_fields.get(SIGNATURE)
    if not signature:
        return False
    expected = sign(cmd.ext_fields, cmd.body, secret_key)
    return hmac.compare_digest(expected.encode(), signature.encode())
