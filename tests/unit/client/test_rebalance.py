"""Rebalance strategies give RocketMQ 4.9's allocations for the same inputs.

Expected values are worked out from the algorithms by hand (the ring hashes are MD5 of
the documented key strings, pinned as numbers), not taken from the code under test.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.client.consumer import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
)
from broker_core.client.consumer.consistenthash import ConsistentHashRouter, md5_hash
from broker_core.client.consumer.rebalance import message_queue_key, sort_for_allocate, split_like_java
from broker_core.messagequeue import MessageQueue

CIDS4 = ["c0", "c1", "c2", "c3"]


def queues(n: int, topic: str = "TopicTest", broker: str = "broker-a") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


def ids(mqs: Sequence[MessageQueue]) -> list[int]:
    return [mq.queue_id for mq in mqs]


def allocations(
    strategy: AllocateMessageQueueStrategy, mqs: Sequence[MessageQueue], cids: Sequence[str]
) -> dict[str, list[MessageQueue]]:
    return {cid: strategy.allocate("GID_test", cid, mqs, cids) for cid in cids}


class RoomByPrefix:
    """Machine room = the name's part before the first '-' (as RocketMQ's own test does)."""

    def broker_deploy_in(self, mq: MessageQueue) -> str:
        return mq.broker_name.split("-")[0]

    def consumer_deploy_in(self, client_id: str) -> str:
        return client_id.split("-")[0]


ALL_STRATEGIES: list[AllocateMessageQueueStrategy] = [
    AllocateMessageQueueAveragely(),
    AllocateMessageQueueAveragelyByCircle(),
    AllocateMessageQueueByMachineRoom({"room1"}),
    AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), RoomByPrefix()),
    AllocateMessageQueueConsistentHash(),
]


def test_it_names_strategies_as_rocketmq_does() -> None:
    assert [s.name for s in ALL_STRATEGIES] == [
        "AVG",
        "AVG_BY_CIRCLE",
        "MACHINE_ROOM",
        "MACHINE_ROOM_NEARBY-AVG",
        "CONSISTENT_HASH",
    ]
    assert AllocateMessageQueueByConfig().name == "CONFIG"
    nearby_hash = AllocateMachineRoomNearby(AllocateMessageQueueConsistentHash(), RoomByPrefix())
    assert nearby_hash.name == "MACHINE_ROOM_NEARBY-CONSISTENT_HASH"


# -- AVG and AVG_BY_CIRCLE ---------------------------------------------------------------


def test_it_allocates_six_queues_to_four_consumers_in_blocks() -> None:
    got = allocations(AllocateMessageQueueAveragely(), queues(6), CIDS4)
    assert {cid: ids(mqs) for cid, mqs in got.items()} == {"c0": [0, 1], "c1": [2, 3], "c2": [4], "c3": [5]}


def test_it_allocates_six_queues_to_four_consumers_by_circle() -> None:
    got = allocations(AllocateMessageQueueAveragelyByCircle(), queues(6), CIDS4)
    assert {cid: ids(mqs) for cid, mqs in got.items()} == {"c0": [0, 4], "c1": [1, 5], "c2": [2], "c3": [3]}


def test_it_gives_the_extra_queues_to_the_first_consumers_when_queues_outnumber_them() -> None:
    cids = ["c0", "c1", "c2"]
    averagely = allocations(AllocateMessageQueueAveragely(), queues(10), cids)
    assert [ids(averagely[c]) for c in cids] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    circle = allocations(AllocateMessageQueueAveragelyByCircle(), queues(10), cids)
    assert [ids(circle[c]) for c in cids] == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]


@pytest.mark.parametrize(
    "strategy", [AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle()]
)
def test_it_leaves_the_last_consumers_idle_when_they_outnumber_queues(
    strategy: AllocateMessageQueueStrategy,
) -> None:
    got = allocations(strategy, queues(2), CIDS4)
    assert [ids(got[c]) for c in CIDS4] == [[0], [1], [], []]


@pytest.mark.parametrize("strategy", ALL_STRATEGIES[:2] + ALL_STRATEGIES[3:], ids=lambda s: s.name)
def test_it_gives_a_lone_consumer_every_queue(strategy: AllocateMessageQueueStrategy) -> None:
    mqs = queues(5)
    assert strategy.allocate("GID_test", "c0", mqs, ["c0"]) == mqs


def test_it_uses_the_order_it_is_given_and_sorts_as_rebalance_does_on_request() -> None:
    mqs = [
        MessageQueue("T", "broker-b", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-a", 0),
    ]
    assert AllocateMessageQueueAveragely().allocate("G", "c1", mqs, ["c1", "c0"]) == mqs[:2]
    sorted_mqs, sorted_cids = sort_for_allocate(mqs, ["c1", "c0"])
    assert sorted_mqs == [mqs[2], mqs[1], mqs[0]] and sorted_cids == ["c0", "c1"]
    assert AllocateMessageQueueAveragely().allocate("G", "c1", sorted_mqs, sorted_cids) == [mqs[0]]


def test_it_sorts_strings_by_utf16_units_like_java() -> None:
    # U+1F600 is a surrogate pair (D83D DE00) in Java, which sorts before U+FF21.
    assert sort_for_allocate([], ["\uff21", "\U0001f600"])[1] == ["\U0001f600", "\uff21"]


# -- input checks ------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ALL_STRATEGIES, ids=lambda s: s.name)
def test_it_refuses_empty_inputs_with_rocketmqs_messages(strategy: AllocateMessageQueueStrategy) -> None:
    with pytest.raises(ValueError, match="^currentCID is empty$"):
        strategy.allocate("G", "", queues(2), ["c0"])
    with pytest.raises(ValueError, match="^mqAll is null or mqAll empty$"):
        strategy.allocate("G", "c0", [], ["c0"])
    with pytest.raises(ValueError, match="^cidAll is null or cidAll empty$"):
        strategy.allocate("G", "c0", queues(2), [])


@pytest.mark.parametrize("strategy", ALL_STRATEGIES, ids=lambda s: s.name)
def test_it_allocates_nothing_to_a_consumer_the_group_does_not_list(
    strategy: AllocateMessageQueueStrategy, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="broker_core.client.consumer.rebalance"):
        assert strategy.allocate("GID_test", "stranger", queues(4), ["c0", "c1"]) == []
    assert "[BUG] ConsumerGroup: GID_test The consumerId: stranger not in cidAll" in caplog.text


def test_it_returns_the_configured_queues_whatever_the_inputs() -> None:
    configured = [MessageQueue("T", "broker-b", 3)]
    strategy = AllocateMessageQueueByConfig(configured)
    assert strategy.allocate("G", "", [], []) == configured
    assert strategy.allocate("G", "c9", queues(4), ["c0"]) == configured
    assert AllocateMessageQueueByConfig().allocate("G", "c0", queues(4), ["c0"]) == []


# -- MACHINE_ROOM and MACHINE_ROOM_NEARBY ---------------------------------------------------


def test_it_shares_only_the_chosen_rooms_queues_and_hands_the_rest_from_the_end() -> None:
    # RocketMQ's own example: 5 queues on room1 (and 5 elsewhere) over 2 consumers.
    mqs = [MessageQueue("topic", "room1@broker-a" if i < 5 else "room2@broker-b", i) for i in range(10)]
    got = allocations(AllocateMessageQueueByMachineRoom({"room1"}), mqs, ["CID_PREFIX0", "CID_PREFIX1"])
    assert ids(got["CID_PREFIX0"]) == [0, 1, 4] and ids(got["CID_PREFIX1"]) == [2, 3]


def test_it_reads_machine_room_broker_names_with_javas_split() -> None:
    assert split_like_java("room2@b@", "@") == ["room2", "b"]
    assert split_like_java("room1@", "@") == ["room1"]
    assert split_like_java("@", "@") == [] and split_like_java("", "@") == [""]
    names = ["room1@a", "room1@", "room2@b@", "room2@b@c", "@", "room1@a"]
    mqs = [MessageQueue("T", name, i) for i, name in enumerate(names)]
    got = allocations(AllocateMessageQueueByMachineRoom(["room1", "room2"]), mqs, ["c0", "c1"])
    # Only "room1@a" (twice) and "room2@b@" split into exactly two parts.
    assert ids(got["c0"]) == [0, 5] and ids(got["c1"]) == [2]


NEARBY_MQS = [
    *(MessageQueue("T", "bj-c", i) for i in range(2)),
    *(MessageQueue("T", "hz-a", i) for i in range(4)),
    *(MessageQueue("T", "sh-b", i) for i in range(4)),
]


def test_it_keeps_a_rooms_queues_in_the_room_and_shares_orphaned_rooms() -> None:
    nearby = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), RoomByPrefix())
    got = allocations(nearby, NEARBY_MQS, ["hz-c0", "hz-c1", "sh-c0"])
    as_pairs = {cid: [(mq.broker_name, mq.queue_id) for mq in mqs] for cid, mqs in got.items()}
    # bj has no consumer: its two queues are shared by AVG over all three consumers.
    assert as_pairs == {
        "hz-c0": [("hz-a", 0), ("hz-a", 1), ("bj-c", 0)],
        "hz-c1": [("hz-a", 2), ("hz-a", 3), ("bj-c", 1)],
        "sh-c0": [("sh-b", i) for i in range(4)],
    }


def test_it_walks_orphaned_rooms_in_name_order() -> None:
    mqs = [MessageQueue("T", "zz-x", 0), MessageQueue("T", "aa-x", 0), MessageQueue("T", "mm-x", 0)]
    nearby = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), RoomByPrefix())
    got = nearby.allocate("G", "hz-c0", mqs, ["hz-c0"])
    assert [mq.broker_name for mq in got] == ["aa-x", "mm-x", "zz-x"]


def test_it_refuses_a_queue_or_consumer_without_a_machine_room() -> None:
    nearby = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), RoomByPrefix())
    with pytest.raises(
        ValueError, match=r"^Machine room is null for mq MessageQueue \[topic=T, brokerName=-a"
    ):
        nearby.allocate("G", "hz-c0", [MessageQueue("T", "-a", 0)], ["hz-c0"])
    with pytest.raises(ValueError, match="^Machine room is null for consumer id -c1$"):
        nearby.allocate("G", "hz-c0", NEARBY_MQS, ["hz-c0", "-c1"])


# -- CONSISTENT_HASH ---------------------------------------------------------------------

# MD5 of the key's UTF-8 bytes, first 4 bytes as a big-endian unsigned number.
RING_HASHES = {
    "c0-0": 2316876094,
    "c1-0": 3886541579,
    "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=0]": 1987926524,
    "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=1]": 4291349817,
    "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=2]": 853506239,
    "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=3]": 3652785994,
}


def test_it_hashes_keys_with_the_first_four_bytes_of_md5() -> None:
    for key, expected in RING_HASHES.items():
        assert int(hashlib.md5(key.encode()).hexdigest()[:8], 16) == expected
        assert md5_hash(key) == expected


def test_it_keys_a_queue_by_javas_to_string() -> None:
    assert message_queue_key(MessageQueue("TopicTest", "broker-a", 3)) == (
        "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=3]"
    )


def test_it_routes_each_queue_to_the_next_virtual_node_on_the_ring() -> None:
    # One virtual node each: c0-0 at 2316876094, c1-0 at 3886541579.  q0 (1987926524) and
    # q2 (853506239) come before c0-0; q3 (3652785994) lies between; q1 (4291349817) is past
    # the last node and wraps round to c0-0.
    got = allocations(AllocateMessageQueueConsistentHash(1), queues(4), ["c0", "c1"])
    assert ids(got["c0"]) == [0, 1, 2] and ids(got["c1"]) == [3]


def test_it_pins_ten_virtual_node_allocations() -> None:
    got = allocations(AllocateMessageQueueConsistentHash(), queues(8), ["c0", "c1", "c2"])
    assert [ids(got[c]) for c in ["c0", "c1", "c2"]] == [[1], [0, 3, 4, 5, 7], [2, 6]]
    cids = ["192.168.0.1@1234", "192.168.0.2@1234", "192.168.0.3@1234"]
    mqs = queues(4, broker="broker-a") + queues(4, broker="broker-b")
    got = allocations(AllocateMessageQueueConsistentHash(), mqs, cids)
    as_pairs = [[(mq.broker_name, mq.queue_id) for mq in got[c]] for c in cids]
    assert as_pairs == [
        [],
        [("broker-a", 2), ("broker-b", 0), ("broker-b", 1)],
        [("broker-a", 0), ("broker-a", 1), ("broker-a", 3), ("broker-b", 2), ("broker-b", 3)],
    ]


def test_it_moves_only_some_queues_and_only_to_the_new_consumer() -> None:
    before = allocations(AllocateMessageQueueConsistentHash(), queues(8), ["c0", "c1", "c2"])
    after = allocations(AllocateMessageQueueConsistentHash(), queues(8), CIDS4)
    assert [ids(after[c]) for c in CIDS4] == [[1], [0, 4, 5, 7], [6], [2, 3]]
    for cid in ["c0", "c1", "c2"]:
        assert set(after[cid]) <= set(before[cid])


def test_it_allocates_nothing_without_virtual_nodes() -> None:
    assert allocations(AllocateMessageQueueConsistentHash(0), queues(4), ["c0", "c1"]) == {"c0": [], "c1": []}
    with pytest.raises(ValueError, match="illegal virtualNodeCnt :-1"):
        AllocateMessageQueueConsistentHash(-1)


def test_it_uses_a_custom_hash_function() -> None:
    # Every key at 0 on the ring: the last virtual node placed (c1's) takes the slot.
    got = allocations(AllocateMessageQueueConsistentHash(3, lambda key: 0), queues(3), ["c0", "c1"])
    assert got == {"c0": [], "c1": queues(3)}


def test_it_numbers_virtual_nodes_on_from_a_nodes_existing_replicas() -> None:
    router = ConsistentHashRouter(["c0"], 2)
    router.add_node("c0", 1)  # "c0-2", the third replica
    assert router.existing_replicas("c0") == 3
    key = "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=0]"
    assert router.route_node(key) == "c0" and ConsistentHashRouter().route_node(key) is None


# -- properties --------------------------------------------------------------------------

COVERING = [
    AllocateMessageQueueAveragely(),
    AllocateMessageQueueAveragelyByCircle(),
    AllocateMessageQueueConsistentHash(),
    AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), RoomByPrefix()),
    AllocateMachineRoomNearby(AllocateMessageQueueConsistentHash(3), RoomByPrefix()),
]

room_names = st.sampled_from(["hz", "sh", "bj", "sz"])
message_queues = st.builds(
    MessageQueue,
    st.sampled_from(["T", "Orders"]),
    st.builds(lambda room, n: f"{room}-broker{n}", room_names, st.integers(0, 2)),
    st.integers(0, 15),
)
group = st.tuples(
    st.lists(message_queues, min_size=1, max_size=40, unique=True),
    st.lists(
        st.builds(lambda room, n: f"{room}-c{n}", room_names, st.integers(0, 20)),
        min_size=1,
        max_size=12,
        unique=True,
    ),
)


@settings(max_examples=60, deadline=None)
@given(group, st.sampled_from(COVERING), st.booleans())
def test_every_queue_goes_to_exactly_one_consumer(
    inputs: tuple[list[MessageQueue], list[str]], strategy: AllocateMessageQueueStrategy, presort: bool
) -> None:
    mqs, cids = sort_for_allocate(*inputs) if presort else inputs
    handed_out = Counter(mq for mqs_of_one in allocations(strategy, mqs, cids).values() for mq in mqs_of_one)
    assert handed_out == Counter(mqs)


@settings(max_examples=60, deadline=None)
@given(group, st.sets(st.sampled_from(["hz", "sh", "bj"])))
def test_machine_room_hands_out_exactly_the_chosen_rooms_queues(
    inputs: tuple[list[MessageQueue], list[str]], rooms: set[str]
) -> None:
    raw_mqs, cids = sort_for_allocate(*inputs)
    # Same shapes, "<room>@<broker>" names.
    mqs = [MessageQueue(mq.topic, mq.broker_name.replace("-", "@", 1), mq.queue_id) for mq in raw_mqs]
    handed_out = Counter(
        mq for one in allocations(AllocateMessageQueueByMachineRoom(rooms), mqs, cids).values() for mq in one
    )
    assert handed_out == Counter(mq for mq in mqs if mq.broker_name.split("@")[0] in rooms)


@settings(max_examples=40, deadline=None)
@given(group, st.text(alphabet="xyz0123456789", min_size=1, max_size=6))
def test_a_new_consumer_only_takes_queues_never_reshuffles_others(
    inputs: tuple[list[MessageQueue], list[str]], newcomer_suffix: str
) -> None:
    mqs, cids = inputs
    newcomer = f"new-{newcomer_suffix}"
    strategy = AllocateMessageQueueConsistentHash()
    before = allocations(strategy, mqs, cids)
    after = allocations(strategy, mqs, [*cids, newcomer])
    for cid in cids:
        assert set(before[cid]) - set(after[cid]) <= set(after[newcomer])
        assert set(after[cid]) <= set(before[cid])
