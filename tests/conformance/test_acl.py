"""ACL with the official client's set_session_credentials: the right secret is accepted,
a wrong one is refused with NO_PERMISSION."""

from __future__ import annotations

from pathlib import Path

from broker_core.broker.topics import TopicConfig
from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client

TOPIC = "AclTopic"
ACL = """
accounts:
  - accessKey: AK123
    secretKey: SK456
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopic=PUB|SUB
"""


async def test_it_accepts_the_right_secret_and_refuses_a_wrong_one(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    (store_dir / "config").mkdir(parents=True)
    (store_dir / "config" / "plain_acl.yml").write_text(ACL)
    async with run_namesrv() as ns, run_broker(store_dir, ns.address, acl_enable=True) as broker:
        broker.topics.update(TopicConfig(TOPIC, 2, 2))
        await broker.registration.register_all()
        good = await run_official_client(
            "acl_producer_child.py", ns.address, TOPIC, "AK123", "SK456", home=tmp_path / "a"
        )
        assert good == [{"status": 0}], good
        bad = await run_official_client(
            "acl_producer_child.py", ns.address, TOPIC, "AK123", "wrong", home=tmp_path / "b"
        )
        assert "error" in bad[0], bad
        nobody = await run_official_client(
            "acl_producer_child.py", ns.address, TOPIC, "", "", home=tmp_path / "c"
        )
        assert "error" in nobody[0], nobody
        stored = sum(broker.store.get_max_offset_in_queue(TOPIC, q) for q in (0, 1))
        assert stored == 1, "only the correctly signed message was stored"
