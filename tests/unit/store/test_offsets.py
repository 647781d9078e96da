from __future__ import annotations

import threading
from pathlib import Path

import orjson
import pytest

from broker_core.errors import MessageIllegalError
from broker_core.store.offsets import ConsumerOffsetManager

CLIENT = "10.0.0.7:52001"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        self.now += 1
        return self.now


@pytest.fixture
def offsets(tmp_path: Path) -> ConsumerOffsetManager:
    return ConsumerOffsetManager(tmp_path, clock=FakeClock())


def test_it_answers_minus_one_for_an_offset_never_committed(offsets: ConsumerOffsetManager) -> None:
    assert offsets.query_offset("orders", "Payments", 0) == -1
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 10)
    assert offsets.query_offset("orders", "Payments", 1) == -1
    assert offsets.query_offset("audit", "Payments", 0) == -1


def test_it_returns_the_last_committed_offset(offsets: ConsumerOffsetManager) -> None:
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 10)
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 25)
    offsets.commit_offset(CLIENT, "orders", "Payments", 3, 7)
    assert offsets.query_offset("orders", "Payments", 0) == 25
    assert offsets.query_offsets("orders", "Payments") == {0: 25, 3: 7}
    assert offsets.query_offsets("orders", "Refunds") == {}


def test_it_accepts_an_offset_that_moves_back_and_logs_it(
    offsets: ConsumerOffsetManager, caplog: pytest.LogCaptureFixture
) -> None:
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 25)
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 5)
    assert offsets.query_offset("orders", "Payments", 0) == 5
    assert any("moved back" in r.getMessage() and CLIENT in r.getMessage() for r in caplog.records)


def test_it_keeps_the_table_under_topic_at_group_keys(offsets: ConsumerOffsetManager) -> None:
    offsets.commit_offset(CLIENT, "orders", "Payments", 1, 4)
    table = offsets.offset_table
    assert table == {"Payments@orders": {1: 4}}
    table["Payments@orders"][1] = 99
    assert offsets.query_offset("orders", "Payments", 1) == 4, "offset_table must be a copy"


def test_it_tells_which_topics_a_group_consumes_and_which_groups_a_topic_has(
    offsets: ConsumerOffsetManager,
) -> None:
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 1)
    offsets.commit_offset(CLIENT, "orders", "%RETRY%orders", 0, 1)
    offsets.commit_offset(CLIENT, "audit", "Payments", 0, 1)
    assert offsets.which_topics_by_consumer_group("orders") == {"Payments", "%RETRY%orders"}
    assert offsets.which_topics_by_consumer_group("nobody") == set()
    assert offsets.which_groups_by_topic("Payments") == {"orders", "audit"}


def test_it_does_not_match_a_group_that_is_a_prefix_of_another(offsets: ConsumerOffsetManager) -> None:
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 1)
    offsets.commit_offset(CLIENT, "orders2", "Payments", 0, 1)
    assert offsets.remove_consumer_group("orders") == 1
    assert offsets.which_groups_by_topic("Payments") == {"orders2"}


def test_it_removes_a_consumer_group_everywhere(offsets: ConsumerOffsetManager) -> None:
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 1)
    offsets.commit_offset(CLIENT, "orders", "Refunds", 0, 1)
    offsets.commit_offset(CLIENT, "audit", "Payments", 0, 1)
    assert offsets.remove_consumer_group("orders") == 2
    assert offsets.offset_table == {"Payments@audit": {0: 1}}
    assert offsets.remove_consumer_group("orders") == 0


def test_it_removes_a_topic_for_every_group(offsets: ConsumerOffsetManager) -> None:
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 1)
    offsets.commit_offset(CLIENT, "audit", "Payments", 0, 1)
    offsets.commit_offset(CLIENT, "audit", "Refunds", 0, 1)
    assert offsets.remove_topic("Payments") == 2
    assert offsets.offset_table == {"Refunds@audit": {0: 1}}


def test_it_clones_one_groups_offsets_to_another(offsets: ConsumerOffsetManager) -> None:
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 10)
    offsets.commit_offset(CLIENT, "orders", "Payments", 1, 20)
    assert offsets.clone_offset("orders", "orders-replay", "Payments") is True
    assert offsets.query_offsets("orders-replay", "Payments") == {0: 10, 1: 20}
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 11)
    assert offsets.query_offset("orders-replay", "Payments", 0) == 10, "the clone is independent"
    assert offsets.clone_offset("nobody", "orders-replay", "Payments") is False


def test_it_moves_the_data_version_only_when_something_changes(offsets: ConsumerOffsetManager) -> None:
    start = offsets.data_version.counter
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 10)
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 10)
    assert offsets.data_version.counter == start + 1
    offsets.remove_topic("Refunds")
    assert offsets.data_version.counter == start + 1
    offsets.clone_offset("orders", "other", "Payments")
    offsets.remove_consumer_group("other")
    assert offsets.data_version.counter == start + 3


@pytest.mark.parametrize(
    ("group", "topic", "message"),
    [
        ("or@ders", "Payments", "group name 'or@ders' contains '@'"),
        ("orders", "Pay@ments", "topic name 'Pay@ments' contains '@'"),
        ("", "Payments", "group name is empty"),
        ("orders", "Pay ments", "may only contain"),
        ("orders", "T" * 128, "longer than 127"),
    ],
)
def test_it_rejects_invalid_names_clearly(
    offsets: ConsumerOffsetManager, group: str, topic: str, message: str
) -> None:
    with pytest.raises(MessageIllegalError, match=message):
        offsets.commit_offset(CLIENT, group, topic, 0, 1)
    assert offsets.offset_table == {}


def test_it_rejects_an_invalid_clone_destination(offsets: ConsumerOffsetManager) -> None:
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 1)
    with pytest.raises(MessageIllegalError, match="contains '@'"):
        offsets.clone_offset("orders", "a@b", "Payments")


@pytest.mark.parametrize(("queue_id", "offset"), [(-1, 0), (0, -5), (True, 0), (0, 1.5)])
def test_it_rejects_negative_or_non_integer_queue_ids_and_offsets(
    offsets: ConsumerOffsetManager, queue_id: object, offset: object
) -> None:
    with pytest.raises(MessageIllegalError, match="non-negative integer"):
        offsets.commit_offset(CLIENT, "orders", "Payments", queue_id, offset)  # type: ignore[arg-type]


def test_it_round_trips_through_its_file(tmp_path: Path, offsets: ConsumerOffsetManager) -> None:
    offsets.commit_offset(CLIENT, "orders", "Payments", 0, 10)
    offsets.commit_offset(CLIENT, "orders", "Payments", 11, 3)
    offsets.commit_offset(CLIENT, "audit", "%RETRY%audit", 0, 2)
    offsets.persist()

    reloaded = ConsumerOffsetManager(tmp_path)
    assert reloaded.load()
    assert reloaded.offset_table == offsets.offset_table
    assert reloaded.data_version == offsets.data_version


def test_it_writes_rocketmqs_file_shape(tmp_path: Path, offsets: ConsumerOffsetManager) -> None:
    offsets.commit_offset(CLIENT, "orders", "Payments", 10, 5)
    offsets.commit_offset(CLIENT, "orders", "Payments", 2, 7)
    offsets.persist()
    path = tmp_path / "config" / "consumerOffset.json"
    assert offsets.config_file_path == path
    obj = orjson.loads(path.read_bytes())
    assert obj["offsetTable"] == {"Payments@orders": {"2": 7, "10": 5}}
    assert list(obj["offsetTable"]["Payments@orders"]) == ["2", "10"], "queues in numeric order"
    assert set(obj["dataVersion"]) == {"counter", "timestamp"}


def test_it_loads_a_java_brokers_file(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(
        b'{\n\t"dataVersion":{"counter":7,"stateVersion":0,"timestamp":1700000000123},\n'
        b'\t"offsetTable":{\n\t\t"%RETRY%orders@orders":{0:0},\n\t\t"Payments@orders":{0:12,1:9}\n\t}\n}'
    )
    offsets = ConsumerOffsetManager(tmp_path)
    assert offsets.load()
    assert offsets.query_offsets("orders", "Payments") == {0: 12, 1: 9}
    assert offsets.which_topics_by_consumer_group("orders") == {"Payments", "%RETRY%orders"}
    assert offsets.data_version.counter == 7


def test_it_loads_an_old_file_without_a_data_version(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"offsetTable":{"T@g":{0:5}}}')
    offsets = ConsumerOffsetManager(tmp_path)
    assert offsets.load()
    assert offsets.query_offset("g", "T", 0) == 5
    assert offsets.data_version.counter == 0


def test_it_falls_back_to_the_backup_when_an_offset_is_not_a_number(tmp_path: Path) -> None:
    offsets = ConsumerOffsetManager(tmp_path)
    offsets.commit_offset(CLIENT, "g", "T", 0, 5)
    offsets.persist()
    offsets.commit_offset(CLIENT, "g", "T", 0, 6)
    offsets.persist()
    (tmp_path / "config" / "consumerOffset.json").write_bytes(b'{"offsetTable":{"T@g":{"0":"six"}}}')
    reloaded = ConsumerOffsetManager(tmp_path)
    assert reloaded.load()
    assert reloaded.query_offset("g", "T", 0) == 5


def test_it_stays_consistent_under_concurrent_commits_and_persists(
    tmp_path: Path, offsets: ConsumerOffsetManager
) -> None:
    def commit(group: str) -> None:
        for offset in range(300):
            offsets.commit_offset(CLIENT, group, "Payments", offset % 4, offset)

    def persist() -> None:
        for _ in range(20):
            offsets.persist()

    threads = [threading.Thread(target=commit, args=(f"g{n}",)) for n in range(4)]
    threads.append(threading.Thread(target=persist))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    offsets.persist()

    reloaded = ConsumerOffsetManager(tmp_path)
    assert reloaded.load()
    assert reloaded.offset_table == {f"Payments@g{n}": {0: 296, 1: 297, 2: 298, 3: 299} for n in range(4)}
