"""The store owns its geometry (issue 14, finding 1).

``store check`` on a store made with 1 MiB segments grew segment 0 to 1 GiB and the next
start deleted the rest.  Now the geometry is recorded with the files, every reader takes
it from there, a config that disagrees is refused with a sentence, and nothing is cut.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from broker_core.config import StoreConfig
from broker_core.store.geometry import GEOMETRY_FILE, StoreGeometryError
from broker_core.store.store import MessageStore

from .conftest import ORDERS, REPO, Clock, message, read_queue

COUNT = 8000


def small_segment_store(root: Path) -> StoreConfig:
    """A store written with 1 MiB commit-log segments (several of them), closed cleanly."""
    config = StoreConfig(str(root), mapped_file_size_commit_log=1024 * 1024, warm_mapped_file_enable=False)
    with MessageStore(config, clock_ms=Clock()) as store:
        for i in range(COUNT):
            assert store.put_message(message(ORDERS, i % 4, b"m-%05d" % i + b"." * 400)).ok
    assert len(list((root / "commitlog").iterdir())) > 2
    return config


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker_core", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def snapshot(root: Path) -> dict[Path, tuple[int, int]]:
    return {p: (p.stat().st_size, hash(p.read_bytes())) for p in root.rglob("*") if p.is_file()}


def test_store_check_reads_the_recorded_geometry_and_changes_nothing(tmp_path: Path) -> None:
    config = small_segment_store(tmp_path / "store")
    geometry = json.loads((config.root / GEOMETRY_FILE).read_text())
    assert geometry["mappedFileSizeCommitLog"] == 1024 * 1024
    before = snapshot(config.root)
    result = run_cli("store", "check", "--store", str(config.root))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "geometry (recorded): commit-log segments of 1048576 bytes" in result.stdout
    assert f"{COUNT} valid record(s)" in result.stdout
    assert snapshot(config.root) == before, "store check changed the store"
    with MessageStore(config, clock_ms=Clock()) as store:  # the broker's next start keeps all
        assert sum(len(read_queue(store, ORDERS, q)) for q in range(4)) == COUNT


def test_a_config_that_disagrees_with_the_store_is_refused_with_a_sentence(tmp_path: Path) -> None:
    config = small_segment_store(tmp_path / "store")
    before = snapshot(config.root)
    with pytest.raises(StoreGeometryError, match="mappedFileSizeCommitLog = 1073741824.*made with 1048576"):
        MessageStore(StoreConfig(str(config.root)))
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir = {config.root}\nlistenPort = 0\n")
    refused = run_cli("broker", "-c", str(conf))
    assert refused.returncode == 1
    assert "mappedFileSizeCommitLog = 1073741824 (the store's files were made with 1048576)" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert snapshot(config.root) == before


def test_a_store_from_before_the_record_has_its_geometry_inferred(tmp_path: Path) -> None:
    config = small_segment_store(tmp_path / "store")
    (config.root / GEOMETRY_FILE).unlink()
    result = run_cli("store", "check", "--store", str(config.root))
    assert result.returncode == 0, result.stdout
    assert "geometry (inferred from the files): commit-log segments of 1048576 bytes" in result.stdout
    with pytest.raises(StoreGeometryError):
        MessageStore(StoreConfig(str(config.root)))
    with MessageStore(config, clock_ms=Clock()) as store:
        assert sum(len(read_queue(store, ORDERS, q)) for q in range(4)) == COUNT
    assert json.loads((config.root / GEOMETRY_FILE).read_text())["mappedFileSizeCommitLog"] == 1024 * 1024


def test_a_segment_larger_than_the_geometry_is_reported_not_cut(tmp_path: Path) -> None:
    config = small_segment_store(tmp_path / "store")
    first = sorted((config.root / "commitlog").iterdir())[0]
    with open(first, "ab") as f:
        f.write(b"\0" * 4096)
    with MessageStore(config, clock_ms=Clock()) as store:
        assert any("4096 bytes past the file size" in p for p in store.open_problems)
        assert sum(len(read_queue(store, ORDERS, q)) for q in range(4)) == COUNT
    assert first.stat().st_size == 1024 * 1024 + 4096
