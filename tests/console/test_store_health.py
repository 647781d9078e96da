"""Store health on the Maintenance page (issue 14): a broker that skipped a damaged record at
recovery shows the range there and in the API, against a real nameserver and broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from broker_core.broker.maintenance import FILE_EXPIRY
from broker_core.config import StoreConfig
from broker_core.model.message import MessageInner
from broker_core.store.store import MessageStore
from console.maintenance import services as maintenance

from .conftest import run_servers


def damaged_store(root: Path) -> tuple[int, int]:
    """A store as ``run_servers``' broker makes it (1 MiB segments), with the body of its
    sixth record flipped; return that record's (offset, size)."""
    config = StoreConfig(str(root), mapped_file_size_commit_log=1024 * 1024, warm_mapped_file_enable=False)
    with MessageStore(config) as store:
        written = [
            store.put_message(MessageInner("HealthTopic", 0, b"m-%d" % i + b"." * 100)) for i in range(12)
        ]
    phys, size = written[5].wrote_offset, written[5].wrote_bytes
    with open(root / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(phys + size - 20)
        f.write(b"\xff")
    return phys, size


@pytest.mark.django_db
def test_the_maintenance_page_shows_the_damaged_range_a_broker_skipped(
    tmp_path: Path, console_redis: Any, settings: Any, personas: dict[str, Client]
) -> None:
    console_redis.flushdb()
    phys, size = damaged_store(tmp_path / "store")
    with run_servers(tmp_path) as servers:
        settings.QUIVER = {**settings.QUIVER, "NAMESRV_ADDR": servers.namesrv_addr}
        maintenance.discover(FILE_EXPIRY, masters_only=False)
        body = personas["viewer"].get("/api/maintenance/jobs/").json()
        (broker,) = [b for b in body["brokers"] if b["brokerAddr"] == servers.broker_addr]
        assert [(r["start"], r["end"], r["size"]) for r in broker["damaged"]] == [(phys, phys + size, size)]
        assert broker["diskFull"] is None
        page = personas["viewer"].get("/maintenance/").content.decode()
        assert "Store health" in page
        assert f'<span class="badge bad">{size} bytes</span> at {phys}–{phys + size}' in page
    log = (tmp_path / "broker.log").read_text()
    assert f"damaged range [{phys}, {phys + size})" in log, "logged at ERROR, which the broker log shows"
