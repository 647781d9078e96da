"""The admin client's ACL calls: a broker's ``plain_acl.yml`` accounts and global whitelist."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from broker_core.client.admin.base import AdminRequests
from broker_core.remoting.codes import RequestCode

__all__ = ["AclCalls"]


class AclCalls(AdminRequests):
    """Read and change one broker's ACL accounts (RocketMQ's plain ACL admin requests)."""

    async def acl_config(self, broker_addr: str) -> dict[str, Any]:
        """The broker's ACL: ``globalWhiteAddrs`` and ``plainAccessConfigs`` (secrets included)."""
        response = await self._invoke(broker_addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
        return dict(self._json(response, "ACL config"))

    async def update_acl_account(self, broker_addr: str, account: Mapping[str, Any]) -> None:
        """Create or update one account (accessKey, secretKey, whiteRemoteAddress, admin,
        defaultTopicPerm, defaultGroupPerm, topicPerms and groupPerms as ``a=PUB,b=SUB``)."""
        fields = {
            k: ",".join(v) if isinstance(v, list | tuple) else v for k, v in account.items() if v is not None
        }
        await self._invoke(broker_addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields)

    async def delete_acl_account(self, broker_addr: str, access_key: str) -> None:
        await self._invoke(broker_addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key})

    async def update_global_white_addrs(self, broker_addr: str, addresses: Sequence[str]) -> None:
        fields = {"globalWhiteAddrs": ",".join(addresses)}
        await self._invoke(broker_addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields)
