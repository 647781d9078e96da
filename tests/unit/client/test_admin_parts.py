"""The admin client is composed of one part per concern over its request layer.

Each part (``broker_core/client/admin/<concern>.py``) builds on the request layer and the
parts it uses, never on the composed ``AdminClient``; the request layer's concurrency
helpers fail a call only once every request has finished; and every public call of every
part turns a malformed answer into an ``AdminError``.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
from pathlib import Path

import pytest

import broker_core.client.admin as admin_package
from broker_core.client.admin import AdminClient, acl, cluster, groups, maintenance, messages, offsets, topics
from broker_core.client.admin.base import AdminRequests
from broker_core.errors import AdminError

PARTS_DIR = Path(admin_package.__file__).parent


def test_no_part_imports_the_composed_client() -> None:
    offences = []
    for path in sorted(PARTS_DIR.glob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "broker_core.client.admin":
                offences.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Import) and any(a.name == "broker_core.client.admin" for a in node.names):
                offences.append(f"{path.name}:{node.lineno}")
    assert offences == []


def test_the_client_is_every_part_over_the_request_layer() -> None:
    parts = (
        cluster.ClusterReads,
        topics.TopicCalls,
        groups.GroupCalls,
        offsets.OffsetCalls,
        messages.MessageCalls,
        acl.AclCalls,
        maintenance.BrokerCalls,
    )
    for part in parts:
        assert part in AdminClient.__mro__ and issubclass(part, AdminRequests), part
    assert AdminClient.__mro__[-2] is AdminRequests


async def _later(value: object, delay: float, finished: list[object]) -> object:
    await asyncio.sleep(delay)
    finished.append(value)
    if isinstance(value, BaseException):
        raise value
    return value


async def test_both_returns_two_results_of_different_types_in_order() -> None:
    finished: list[object] = []
    assert await AdminRequests._both(_later("a", 0.02, finished), _later(7, 0.0, finished)) == ("a", 7)


async def test_both_raises_a_failure_once_the_other_call_has_finished() -> None:
    finished: list[object] = []
    failure = AdminError("refused")
    with pytest.raises(AdminError, match="refused"):
        await AdminRequests._both(_later(failure, 0.0, finished), _later("slow", 0.05, finished))
    assert finished == [failure, "slow"]


async def test_gather_raises_the_first_failure_in_call_order_after_all_finished() -> None:
    requests = AdminRequests(None)
    finished: list[object] = []
    first, second = AdminError("first"), AdminError("second")
    calls = [_later(second, 0.0, finished), _later(first, 0.01, finished), _later("ok", 0.03, finished)]
    with pytest.raises(AdminError, match="second"):
        await requests._gather(calls)
    assert finished == [second, first, "ok"]
    assert await requests._gather(_later(n, 0.0, finished) for n in (1, 2, 3)) == [1, 2, 3]
    await requests.close()


def test_every_public_call_of_every_part_reports_malformed_answers_as_admin_errors() -> None:
    public = [
        name
        for name in dir(AdminClient)
        if not name.startswith("_") and inspect.iscoroutinefunction(getattr(AdminClient, name))
    ]
    # One call from each part at least: cluster, topics, groups, offsets, messages, ACL, broker.
    for name in (
        "topic_route",
        "topic_stats",
        "consume_stats",
        "reset_offset_by_time",
        "messages_by_time",
        "acl_config",
        "maintenance_status",
    ):
        assert name in public
    unwrapped = [name for name in public if not hasattr(getattr(AdminClient, name), "__wrapped__")]
    assert unwrapped == []
