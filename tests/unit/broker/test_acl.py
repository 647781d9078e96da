"""ACL accounts from plain_acl.yml (``broker_core.broker.acl``), with real signatures."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson

from broker_core.broker.acl import PlainAcl
from broker_core.model.acl import PUB, SUB, parse_acl, parse_perm
from broker_core.remoting import acl as signing
from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand

ACL_YAML = """
globalWhiteRemoteAddresses:
  - 10.9.*
accounts:
  - accessKey: app
    secretKey: s3cret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - Orders=PUB|SUB
      - Audit=SUB
      - Secret=DENY
    groupPerms:
      - blocked=DENY
  - accessKey: ops
    secretKey: ops-secret
    admin: true
  - accessKey: lan
    secretKey: whatever
    whiteRemoteAddress: 192.168.7.*
    defaultTopicPerm: PUB
"""


def signed(
    code: int, fields: dict[str, str], access_key: str, secret: str, body: bytes = b""
) -> RemotingCommand:
    ext = {**fields, "AccessKey": access_key, "OnsChannel": "ALIYUN"}
    ext["Signature"] = signing.sign(ext, body, secret)
    return RemotingCommand.request(code, ext, body)


def acl_in(tmp_path: Path, text: str = ACL_YAML) -> PlainAcl:
    (tmp_path / "plain_acl.yml").write_text(text)
    return PlainAcl(tmp_path)


def test_it_parses_permissions_as_rocketmq_does() -> None:
    assert (parse_perm("PUB|SUB"), parse_perm("SUB|PUB"), parse_perm(" sub "), parse_perm("nonsense")) == (
        3,
        3,
        2,
        0,
    )
    white, accounts = parse_acl(ACL_YAML)
    assert white == ["10.9.*"] and accounts["app"].topic_perms == {
        "Orders": PUB | SUB,
        "Audit": SUB,
        "Secret": 0,
    }


def test_it_lets_a_correctly_signed_send_through_and_refuses_a_wrong_secret(tmp_path: Path) -> None:
    acl = acl_in(tmp_path)
    send = {"topic": "Orders", "queueId": "0"}
    assert acl.check(signed(RequestCode.SEND_MESSAGE, send, "app", "s3cret", b"body"), "1.2.3.4:5") is None
    problem = acl.check(signed(RequestCode.SEND_MESSAGE, send, "app", "wrong", b"body"), "1.2.3.4:5")
    assert problem is not None and "signature" in problem
    tampered = signed(RequestCode.SEND_MESSAGE, send, "app", "s3cret", b"body")
    tampered.body = b"other body"
    assert "signature" in (acl.check(tampered, "1.2.3.4:5") or "")


def test_it_enforces_topic_and_group_permissions(tmp_path: Path) -> None:
    acl = acl_in(tmp_path)
    addr = "1.2.3.4:5"
    assert "may not send" in acl.check(
        signed(RequestCode.SEND_MESSAGE, {"topic": "Audit"}, "app", "s3cret"), addr
    )
    assert "may not send" in acl.check(
        signed(RequestCode.SEND_MESSAGE_V2, {"b": "Other"}, "app", "s3cret"), addr
    )
    pull = {"topic": "Audit", "consumerGroup": "readers"}
    assert acl.check(signed(RequestCode.PULL_MESSAGE, pull, "app", "s3cret"), addr) is None
    pull["consumerGroup"] = "blocked"
    assert "group 'blocked'" in acl.check(signed(RequestCode.PULL_MESSAGE, pull, "app", "s3cret"), addr)
    heartbeat = orjson.dumps(
        {
            "clientID": "c",
            "consumerDataSet": [{"groupName": "readers", "subscriptionDataSet": [{"topic": "Secret"}]}],
        }
    )
    assert "Secret" in acl.check(signed(RequestCode.HEART_BEAT, {}, "app", "s3cret", heartbeat), addr)
    create = {"topic": "New"}
    assert "admin" in acl.check(signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create, "app", "s3cret"), addr)
    assert acl.check(signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create, "ops", "ops-secret"), addr) is None
    reset = {"topic": "Audit", "group": "readers", "timestamp": "0"}
    assert "admin" in acl.check(
        signed(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset, "app", "s3cret"), addr
    )
    job = {"job": "file_expiry"}
    assert "admin" in acl.check(signed(RequestCode.QUIVER_RUN_MAINTENANCE_JOB, job, "app", "s3cret"), addr)
    assert acl.check(signed(RequestCode.QUIVER_RUN_MAINTENANCE_JOB, job, "ops", "ops-secret"), addr) is None


def test_it_refuses_requests_without_credentials_unless_white_listed(tmp_path: Path) -> None:
    acl = acl_in(tmp_path)
    bare = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "Orders", "AccessKey": ""})
    assert "no AccessKey" in acl.check(bare, "1.2.3.4:5")
    assert acl.check(bare, "10.9.0.7:5000") is None  # global white list
    unsigned = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "Orders", "AccessKey": "lan"})
    assert acl.check(unsigned, "192.168.7.20:1") is None  # the account's white list skips the signature
    assert "signature" in acl.check(unsigned, "192.168.8.20:1")
    stranger = signed(RequestCode.SEND_MESSAGE, {"topic": "Orders"}, "nobody", "x")
    assert "no ACL account" in acl.check(stranger, "1.2.3.4:5")


def test_it_reloads_the_file_when_it_changes_and_keeps_the_old_accounts_if_it_is_broken(
    tmp_path: Path,
) -> None:
    acl = acl_in(tmp_path)
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_YAML.replace("s3cret", "rotated"))
    os.utime(path, (time.time() + 5, time.time() + 5))
    acl.reload(force=True)
    assert acl.accounts["app"].secret_key == "rotated"
    path.write_text("accounts: [ {accessKey: broken")  # invalid YAML
    os.utime(path, (time.time() + 10, time.time() + 10))
    acl.reload(force=True)
    assert acl.accounts["app"].secret_key == "rotated"
