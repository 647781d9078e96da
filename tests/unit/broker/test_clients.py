"""The broker's client tables: heartbeats, membership changes and expiry of silent clients."""

from __future__ import annotations

from broker_core.broker.clients import ClientTables
from broker_core.remoting.connection import Connection


def channel(address: str) -> Connection:
    """A connection not yet attached to a socket: identity and address are all the tables use.

    (Closing real sockets of expired clients is covered in tests/integration/test_broker_admin.py.)
    """
    conn = Connection()
    conn.remote_address = address
    return conn


def beat(tables: ClientTables, client_id: str, conn: Connection, now_ms: int) -> list[str]:
    body = {
        "clientID": client_id,
        "producerDataSet": [{"groupName": "P"}],
        "consumerDataSet": [{"groupName": "G", "consumeFromWhere": 4, "subscriptionDataSet": []}],
    }
    return tables.heartbeat(body, conn, language="CPP", version=317, now_ms=now_ms)


def test_heartbeats_record_language_version_and_consume_from_where() -> None:
    tables = ClientTables()
    conn = channel("10.1.1.1:5000")
    assert beat(tables, "c1", conn, 0) == ["G"]
    assert beat(tables, "c1", conn, 10) == []  # a known member: no change
    (client,) = tables.consumer_clients("G")
    assert client.to_json() == {
        "clientId": "c1",
        "clientAddr": "10.1.1.1:5000",
        "language": "CPP",
        "version": 317,
    }
    assert client.consume_from_where == "CONSUME_FROM_FIRST_OFFSET" and client.last_update_ms == 10
    assert client.consume_type == "CONSUME_PASSIVELY"  # absent: the push default
    assert tables.producer_groups() == ["P"] and tables.consumer_groups() == ["G"]


def test_silent_clients_expire_and_their_connection_is_closed() -> None:
    tables = ClientTables()
    old, fresh = channel("a:1"), channel("b:2")
    beat(tables, "old", old, now_ms=0)
    beat(tables, "fresh", fresh, now_ms=100_000)
    assert tables.expire_idle(now_ms=120_000, max_idle_ms=120_000) == []  # exactly at the limit: kept
    assert tables.expire_idle(now_ms=120_001, max_idle_ms=120_000) == ["G"]
    assert tables.consumer_ids("G") == ["fresh"]
    assert [c.client_id for c in tables.producer_clients("P")] == ["fresh"]
