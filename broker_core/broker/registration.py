"""Keeping the nameservers informed: REGISTER_BROKER at start and every 30 s, UNREGISTER at stop.

A broker registers with every configured nameserver independently (they share nothing),
sending its topic configs and their data version; the nameservers rebuild their route
tables from that.  A nameserver that is down is retried on the next round; its failure
never stops the broker or the other registrations.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable
from typing import Any

import orjson

from broker_core.aio import stop_task
from broker_core.config import BrokerConfig
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand

log = logging.getLogger(__name__)

REGISTER_TIMEOUT_SECONDS = 6.0


def register_body(topic_config_wrapper: dict[str, Any]) -> bytes:
    """RocketMQ's RegisterBrokerBody, uncompressed."""
    return orjson.dumps({"topicConfigSerializeWrapper": topic_config_wrapper, "filterServerList": []})


class BrokerRegistration:
    """Registers one broker with its nameservers, on a timer, from the broker's event loop."""

    def __init__(
        self,
        config: BrokerConfig,
        client: RemotingClient,
        topic_config_wrapper: Callable[[], dict[str, Any]],
        *,
        broker_addr: str,
        ha_addr: Callable[[], str],
        on_master: Callable[[str, str], None] = lambda master_addr, ha_addr: None,
    ) -> None:
        self.config = config
        self.client = client
        self._wrapper = topic_config_wrapper
        self.broker_addr = broker_addr
        self._ha_addr = ha_addr
        # Told the master's address and HA address each time a nameserver names them (a
        # slave's registration is answered with them).
        self._on_master = on_master
        self._task: asyncio.Task[None] | None = None
        # Last outcome per nameserver ("ok" or the error), for runtime info and logs.
        self.last_result: dict[str, str] = {}

    def _header(self) -> dict[str, str]:
        return {
            "brokerAddr": self.broker_addr,
            "brokerId": str(self.config.broker_id),
            "brokerName": self.config.broker_name,
            "clusterName": self.config.broker_cluster_name,
            "haServerAddr": self._ha_addr(),
            "compressed": "false",
        }

    async def register_all(self) -> None:
        """Register with every nameserver now (concurrently); failures are logged, not raised."""
        body = register_body(self._wrapper())
        header = {**self._header(), "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
        await asyncio.gather(*(self._register(addr, header, body) for addr in self.config.namesrv_addrs))

    async def _register(self, addr: str, header: dict[str, str], body: bytes) -> None:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(header), body)
        try:
            reply = await self.client.invoke(addr, request, timeout=REGISTER_TIMEOUT_SECONDS)
        except Exception as exc:  # a nameserver being down is routine: next round retries
            self._note(addr, f"unreachable: {exc}")
            return
        if reply.code != ResponseCode.SUCCESS:
            self._note(addr, f"refused ({reply.code}): {reply.remark}")
            return
        self._note(addr, "ok")
        master_addr = reply.ext_fields.get("masterAddr") or ""
        if master_addr:
            self._on_master(master_addr, reply.ext_fields.get("haServerAddr") or "")

    def _note(self, addr: str, outcome: str) -> None:
        if self.last_result.get(addr) != outcome:
            (log.info if outcome == "ok" else log.warning)(
                "registration with nameserver %s: %s", addr, outcome
            )
        self.last_result[addr] = outcome

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="broker-registration")

    async def _loop(self) -> None:
        period = self.config.register_name_server_period / 1000
        while True:
            await self.register_all()
            await asyncio.sleep(period)

    async def stop(self) -> None:
        """Stop the timer and unregister from every nameserver (best effort)."""
        await stop_task(self._task)
        self._task = None
        header = {
            key: value
            for key, value in self._header().items()
            if key in ("brokerAddr", "brokerId", "brokerName", "clusterName")
        }
        await asyncio.gather(
            *(self._unregister(addr, header) for addr in self.config.namesrv_addrs), return_exceptions=True
        )

    async def _unregister(self, addr: str, header: dict[str, str]) -> None:
        request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(header))
        try:
            await self.client.invoke(addr, request, timeout=REGISTER_TIMEOUT_SECONDS)
        except Exception as exc:
            log.warning("unregistering from nameserver %s failed: %s", addr, exc)
