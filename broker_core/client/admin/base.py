"""The admin client's request layer: one connection pool, signing, and how an answer is judged.

Every part of the admin client (``cluster``, ``topics``, ``groups``, ``offsets``,
``messages``, ``acl``, ``maintenance``) sends its requests through ``AdminRequests``:

- to a broker: ``_invoke`` (one address; a refusal raises ``AdminError`` with the response
  code and remark), ``_ask_each`` (several addresses concurrently, the whole call failing
  when any fails, so a result is never silently partial) and ``requests``, the typed
  request layer of ``broker_core.client.requests`` for requests with a declared header
  (pulls, offset commits), which the consumers use too;
- to the nameservers: ``_namesrv`` (one after another until one answers) and
  ``_each_namesrv`` (all of them, for writes: they share nothing).

No answer at all raises ``AdminUnreachableError``.  Thread-safety: event-loop only, like
the ``RemotingClient`` underneath.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from broker_core.client.requests import BrokerRequests
from broker_core.errors import AdminError, AdminUnreachableError
from broker_core.remoting import fastjson
from broker_core.remoting.acl import sign_request
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.errors import RemotingError

__all__ = ["AdminRequests", "parse_namesrv_addr"]

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")


def parse_namesrv_addr(addrs: str | Sequence[str] | None) -> list[str]:
    """``"a:9876;b:9876"`` (RocketMQ's namesrvAddr; commas too) or a list -> addresses, in order."""
    if not addrs:
        return []
    parts = addrs.replace(",", ";").split(";") if isinstance(addrs, str) else list(addrs)
    return [p.strip() for p in parts if p.strip()]


def _code_name(code: int) -> str:
    try:
        return f"{ResponseCode(code).name} ({code})"
    except ValueError:
        return f"code {code}"


def _request_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return f"request {code}"


class AdminRequests:
    """Send admin requests to brokers and nameservers; the base every admin part builds on.

    Args:
        namesrv_addr: nameserver addresses, ``"a:p;b:p"`` or a sequence.  May be empty
            for calls that name their broker (``broker_config(addr)``...); the others then
            raise ``AdminError``.
        timeout: seconds to wait for each response.
        connect_timeout: seconds to wait for each new connection.
        remoting: a client to share (not closed by ``close``); by default one of our own.
        access_key, secret_key: an ACL account (``plain_acl.yml``); when given, every
            request is signed with it, as RocketMQ's tools do for a broker with ``aclEnable``.
        tls: an SSL context to connect with (``remoting.tls.client_context``): servers with
            ``tlsMode = enforcing`` take nothing else.
    """

    def __init__(
        self,
        namesrv_addr: str | Sequence[str] | None,
        *,
        timeout: float = 5.0,
        connect_timeout: float = 3.0,
        remoting: RemotingClient | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if bool(access_key) != bool(secret_key):
            raise AdminError("an ACL account needs both an access key and a secret key")
        self._credentials = (access_key, secret_key) if access_key and secret_key else None
        self.namesrv_addrs = parse_namesrv_addr(namesrv_addr)
        self.timeout = timeout
        self.tls = tls
        """The SSL context connections are made with (None: plain; ignored with ``remoting``)."""
        if remoting is None:
            remoting = RemotingClient(connect_timeout=connect_timeout, tls=tls)
            self._owns_remoting = True
        else:
            self._owns_remoting = False
        self._remoting = remoting
        self._namesrv_index = 0  # the last nameserver that answered is asked first
        # Typed broker requests (pull...) over ``_send_command``: signed, AdminUnreachableError.
        self.requests = BrokerRequests(self._send_command)

    def serve(self, code: int, handler: Any) -> None:
        """Answer requests a broker sends on this client's connections (``handler(request,
        conn)``, as a server's): how a proxy hears a broker's transaction check-back."""
        self._remoting.register(code, handler)

    async def close(self) -> None:
        """Close our connections (a shared ``remoting`` client is left open)."""
        if self._owns_remoting:
            await self._remoting.close()

    async def _send(
        self, addr: str, code: int, fields: Mapping[str, Any] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """Send one request and return whatever the remote answered."""
        return await self._send_command(addr, RemotingCommand.request(code, dict(fields or {}), body))

    async def _send_command(
        self, addr: str, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Sign and send ``request``; whatever the remote answered, or AdminUnreachableError."""
        if self._credentials is not None:
            sign_request(request, *self._credentials)
        try:
            return await self._remoting.invoke(
                addr, request, self.timeout if timeout_s is None else timeout_s
            )
        except RemotingError as exc:
            reason = str(exc).removeprefix(f"{addr}: ")
            raise AdminUnreachableError(
                f"{addr} did not answer {_request_name(request.code)}: {reason}", addr=addr
            ) from exc

    async def _invoke(
        self,
        addr: str,
        code: int,
        fields: Mapping[str, Any] | None = None,
        body: bytes = b"",
        *,
        accept: Iterable[int] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """Send one request; return the response when its code is in ``accept``."""
        response = await self._send(addr, code, fields, body)
        if response.code not in set(accept):
            raise self._refusal(addr, code, response)
        return response

    @staticmethod
    def _refusal(addr: str, code: int, response: RemotingCommand) -> AdminError:
        remark = response.remark or ""
        return AdminError(
            f"{addr} refused {_request_name(code)}: {_code_name(response.code)}"
            + (f": {remark}" if remark else ""),
            code=response.code,
            remark=remark,
            addr=addr,
        )

    async def _namesrv(
        self,
        code: int,
        fields: Mapping[str, Any] | None = None,
        *,
        accept: Iterable[int] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """Ask the nameservers in turn until one answers (any answer, refusals included)."""
        self._need_namesrv()
        failures = []
        count = len(self.namesrv_addrs)
        for step in range(count):
            index = (self._namesrv_index + step) % count
            addr = self.namesrv_addrs[index]
            try:
                response = await self._send(addr, code, fields)
            except AdminUnreachableError as exc:
                failures.append(str(exc))
                continue
            self._namesrv_index = index
            if response.code not in set(accept):
                raise self._refusal(addr, code, response)
            return response
        raise AdminUnreachableError("no nameserver answered: " + "; ".join(failures))

    async def _each_namesrv(self, code: int, fields: Mapping[str, Any]) -> list[str]:
        """Send to every nameserver (they share nothing); return those that answered.

        A nameserver that is down is skipped: it holds no routes until brokers register
        with it again, and they register their current tables.  Only when none answers
        does the call fail.
        """
        self._need_namesrv()
        results = await asyncio.gather(
            *(self._invoke(addr, code, fields) for addr in self.namesrv_addrs), return_exceptions=True
        )
        answered, failures = [], []
        for addr, result in zip(self.namesrv_addrs, results, strict=True):
            if isinstance(result, AdminUnreachableError):
                failures.append(str(result))
            elif isinstance(result, BaseException):
                raise result
            else:
                answered.append(addr)
        if not answered:
            raise AdminUnreachableError("no nameserver answered: " + "; ".join(failures))
        return answered

    def _need_namesrv(self) -> None:
        if not self.namesrv_addrs:
            raise AdminError("no nameserver address given (namesrvAddr, e.g. 127.0.0.1:9876)")

    @staticmethod
    def _json(response: RemotingCommand, what: str) -> Any:
        """The response body as JSON (fastjson's dialect accepted)."""
        try:
            return fastjson.loads(response.body) if response.body else {}
        except (fastjson.FastjsonError, UnicodeDecodeError) as exc:
            raise AdminError(f"malformed {what} body: {exc}", code=response.code) from exc

    async def _gather(self, calls: Iterable[Awaitable[T]]) -> list[T]:
        """Run ``calls`` concurrently; raise the first failure once all have finished."""
        results: list[T] = []
        for result in await asyncio.gather(*calls, return_exceptions=True):
            if isinstance(result, BaseException):
                raise result
            results.append(result)
        return results

    @staticmethod
    async def _both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
        """``_gather`` for two calls whose results differ in type."""
        a, b = await asyncio.gather(first, second, return_exceptions=True)
        if isinstance(a, BaseException):
            raise a
        if isinstance(b, BaseException):
            raise b
        return a, b

    async def _ask_each(
        self,
        addrs: Iterable[str],
        code: int,
        fields: Mapping[str, Any] | None = None,
        body: bytes = b"",
        *,
        skip: Iterable[int] = (),
    ) -> dict[str, RemotingCommand]:
        """Send one request to every address; successes by address.

        Answers whose code is in ``skip`` mean "nothing here" and are left out; any other
        refusal, or a broker that does not answer, fails the call.
        """
        addr_list = sorted(set(addrs))
        accept = {ResponseCode.SUCCESS, *skip}
        responses = await self._gather(self._invoke(a, code, fields, body, accept=accept) for a in addr_list)
        return {a: r for a, r in zip(addr_list, responses, strict=True) if r.code == ResponseCode.SUCCESS}
