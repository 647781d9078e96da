"""RocketMQ 4's ACL admin requests: change the broker's plain_acl.yml over the protocol.

UPDATE_AND_CREATE_ACL_CONFIG (50) creates or updates an account from its ext fields,
DELETE_ACL_CONFIG (51) removes one, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) replaces the
addresses that need no account, GET_BROKER_CLUSTER_ACL_CONFIG (54) answers the whole file
(secrets included: the request is for admin accounts only).  A broker without
``aclEnable`` refuses them all: there is no ACL to change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
import yaml

from broker_core.broker.acl import PlainAcl
from broker_core.model.acl import account_to_json
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController


class AclConfigProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def _acl(self, request: RemotingCommand) -> PlainAcl | RemotingCommand:
        if self.broker.acl is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, "ACL is off on this broker (aclEnable = false)"
            )
        return self.broker.acl

    def update_account(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        acl = self._acl(request)
        if isinstance(acl, RemotingCommand):
            return acl
        try:
            acl.upsert_account(dict(request.ext_fields))
        except (ValueError, OSError, yaml.YAMLError) as exc:
            return request.response(
                ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, f"cannot save the account: {exc}"
            )
        return request.response()

    def delete_account(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        acl = self._acl(request)
        if isinstance(acl, RemotingCommand):
            return acl
        key = request.ext_fields.get("accessKey", "")
        try:
            found = acl.delete_account(key)
        except (ValueError, OSError) as exc:
            return request.response(
                ResponseCode.DELETE_ACL_CONFIG_FAILED, f"cannot delete the account: {exc}"
            )
        if not found:
            return request.response(ResponseCode.DELETE_ACL_CONFIG_FAILED, f"no account {key!r}")
        return request.response()

    def update_global_white(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        acl = self._acl(request)
        if isinstance(acl, RemotingCommand):
            return acl
        raw = request.ext_fields.get("globalWhiteAddrs", "")
        try:
            acl.set_global_white([a.strip() for a in raw.split(",") if a.strip()])
        except (ValueError, OSError) as exc:
            return request.response(
                ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, f"cannot save: {exc}"
            )
        return request.response()

    def get_config(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        acl = self._acl(request)
        if isinstance(acl, RemotingCommand):
            return acl
        acl.reload(force=True)
        body = {
            "globalWhiteAddrs": acl.global_white,
            "plainAccessConfigs": [account_to_json(a) for _, a in sorted(acl.accounts.items())],
        }
        return request.response(body=orjson.dumps(body))
