"""How the admin client's pop and connection values read the brokers' bodies (pure values,
no servers): a group's pop figures summed over two brokers, and the protocol and SDK
version of a connection, remoting when a broker does not say."""

from __future__ import annotations

from broker_core.client.adminmodels import BrokerPopStatus, ClientConnection, PopStatus


def book(
    group: str, queue_id: int, in_flight: int, attempts: dict[str, int], **counts: int
) -> dict[str, object]:
    return {
        "group": group,
        "topic": "Orders",
        "queueId": queue_id,
        "baseOffset": 10,
        "cursorOffset": 10 + in_flight,
        "inFlight": in_flight,
        "held": counts.get("held", 0),
        "acked": counts.get("acked", 0),
        "redelivered": counts.get("redelivered", 0),
        "deadLettered": counts.get("deadLettered", 0),
        "attempts": attempts,
    }


def test_a_groups_pop_figures_are_summed_over_brokers_and_queues() -> None:
    a = BrokerPopStatus.from_body(
        "broker-a",
        "10.0.0.1:10911",
        {
            "books": [
                book("g", 0, 3, {"1": 2, "3": 1}, acked=5, redelivered=1),
                book("other", 0, 1, {"1": 1}),
            ],
            "groups": {"g": {"ackedTps": 1.5, "fifo": False}, "other": {"ackedTps": 0.0, "fifo": False}},
        },
    )
    b = BrokerPopStatus.from_body(
        "broker-b",
        "10.0.0.2:10911",
        {
            "books": [book("g", 1, 1, {"1": 1}, held=2, acked=2, deadLettered=1)],
            "groups": {"g": {"ackedTps": 0.25, "fifo": True}},
        },
    )
    status = PopStatus((a, b))
    totals = status.groups()
    assert sorted(totals) == ["g", "other"]
    g = totals["g"].to_json()
    assert g == {
        "group": "g",
        "fifo": True,  # one broker says so: its config is a FIFO group's
        "inFlight": 4,
        "held": 2,
        "acked": 7,
        "redelivered": 1,
        "deadLettered": 1,
        "ackedTps": 1.75,
        "attempts": [{"attempt": 1, "messages": 3}, {"attempt": 3, "messages": 1}],
    }
    assert [(x.group, x.broker_name, x.queue_id) for x in status.books] == [
        ("g", "broker-a", 0),
        ("g", "broker-b", 1),
        ("other", "broker-a", 0),
    ]
    assert status.books[1].to_json()["attempts"] == [{"attempt": 1, "messages": 1}]
    # A broker without the request (RocketMQ's own) simply has no books.
    assert PopStatus((BrokerPopStatus("broker-c", "10.0.0.3:10911"),)).groups() == {}


def test_a_connection_says_its_protocol_and_sdk_version() -> None:
    v5 = ClientConnection.from_json(
        {
            "clientId": "host@1@0@x",
            "clientAddr": "10.1.2.3:50123",
            "language": "PYTHON",
            "version": 401,
            "protocol": "gRPC v2",
            "versionDesc": "5.1.2",
        }
    )
    assert v5.grpc and v5.to_json()["versionDesc"] == "5.1.2" and v5.to_json()["protocol"] == "gRPC v2"
    old = ClientConnection.from_json(
        {"clientId": "a", "clientAddr": "1.1.1.1:5", "language": "CPP", "version": 1}
    )
    assert not old.grpc and (old.protocol, old.version_desc) == ("remoting", "")
