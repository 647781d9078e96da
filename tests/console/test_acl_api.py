"""The brokers' plain ACL over REST (RocketMQ 4's ACL requests), against a broker with
``aclEnable``: accounts created, updated and deleted on every master, the white list."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml
from django.test import Client

from console.audit.models import AuditEntry

from .conftest import Servers, run_servers

pytestmark = pytest.mark.django_db

ACL = "/api/clusters/default/acl/"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """A nameserver and a broker with aclEnable; loopback is white-listed (the console signs nothing)."""
    work = tmp_path_factory.mktemp("acl-servers")
    (work / "store" / "config").mkdir(parents=True)
    acl = {
        "globalWhiteRemoteAddresses": ["127.0.0.1"],
        "accounts": [{"accessKey": "rocketmq2", "secretKey": "12345678", "admin": True}],
    }
    (work / "store" / "config" / "plain_acl.yml").write_text(yaml.safe_dump(acl))
    with run_servers(work, aclEnable="true") as found:
        yield found


def test_accounts_are_managed_by_admins_and_shown_without_secrets_to_others(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    account = {
        "accessKey": "orders-app",
        "secretKey": "s3cret-key",
        "defaultTopicPerm": "DENY",
        "topicPerms": ["Orders=PUB"],
    }
    assert personas["operator"].post(ACL, account, content_type="application/json").status_code == 403
    made = personas["admin"].post(ACL, account, content_type="application/json")
    assert made.status_code == 201 and made.json()["brokers"] == [on_servers.broker_addr]
    on_disk = yaml.safe_load((on_servers.store / "config" / "plain_acl.yml").read_text())
    saved = {a["accessKey"]: a for a in on_disk["accounts"]}["orders-app"]
    assert saved["secretKey"] == "s3cret-key" and saved["topicPerms"] == ["Orders=PUB"]
    # An update keeps what it does not name.
    personas["admin"].post(
        ACL, {"accessKey": "orders-app", "groupPerms": ["billing=SUB"]}, content_type="application/json"
    )
    (broker,) = personas["viewer"].get(ACL).json()["brokers"]
    shown = {a["accessKey"]: a for a in broker["plainAccessConfigs"]}["orders-app"]
    assert (
        shown["secretKey"] == "***"
        and shown["topicPerms"] == ["Orders=PUB"]
        and shown["groupPerms"] == ["billing=SUB"]
    )
    (broker,) = personas["admin"].get(ACL).json()["brokers"]
    assert {a["accessKey"]: a for a in broker["plainAccessConfigs"]}["orders-app"][
        "secretKey"
    ] == "s3cret-key"
    bad = personas["admin"].post(
        ACL, {"accessKey": "x y", "secretKey": "short"}, content_type="application/json"
    )
    assert bad.status_code == 400
    assert personas["admin"].delete(ACL + "accounts/orders-app/").status_code == 204
    missing = personas["admin"].delete(ACL + "accounts/orders-app/")
    assert missing.status_code == 502 and missing.json()["brokerCodeName"] == "DELETE_ACL_CONFIG_FAILED"
    actions = list(AuditEntry.objects.order_by("id").values_list("action", "result"))
    assert actions[:3] == [
        ("acl.account.save", "ok"),
        ("acl.account.save", "ok"),
        ("acl.account.delete", "ok"),
    ]


def test_the_white_list_is_replaced_on_every_master(on_servers: Servers, personas: dict[str, Client]) -> None:
    body = {"addresses": ["127.0.0.1", "10.0.*.*"]}
    assert (
        personas["operator"].put(ACL + "whitelist/", body, content_type="application/json").status_code == 403
    )
    assert personas["admin"].put(ACL + "whitelist/", body, content_type="application/json").status_code == 200
    (broker,) = personas["viewer"].get(ACL).json()["brokers"]
    assert broker["globalWhiteAddrs"] == ["127.0.0.1", "10.0.*.*"]
