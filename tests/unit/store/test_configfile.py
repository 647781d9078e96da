from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from broker_core.store.configfile import (
    ConfigFile,
    DataVersion,
    parse_config_json,
    quote_bare_int_keys,
    write_atomically,
)
from broker_core.store.offsets import ConsumerOffsetManager

REPO_ROOT = Path(__file__).resolve().parents[3]


class NotesFile(ConfigFile):
    """The smallest ConfigFile: a dict of strings in ``notes.json``."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._path = path
        self.notes: dict[str, str] = {}

    @property
    def config_file_path(self) -> Path:
        return self._path

    def encode(self) -> dict[str, Any]:
        return {"notes": dict(self.notes)}

    def decode(self, obj: dict[str, Any]) -> None:
        notes = obj["notes"]
        if not isinstance(notes, dict) or not all(isinstance(v, str) for v in notes.values()):
            raise ValueError("notes must map names to strings")
        self.notes = dict(notes)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "config" / "notes.json"


def saved(path: Path, **notes: str) -> NotesFile:
    file = NotesFile(path)
    file.notes = dict(notes)
    file.persist()
    return file


def loaded(path: Path) -> NotesFile:
    file = NotesFile(path)
    assert file.load()
    return file


# -- write_atomically ----------------------------------------------------------------------


def test_it_writes_the_bytes_and_leaves_no_tmp_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "a.json"
    write_atomically(target, b'{"a":1}')
    assert target.read_bytes() == b'{"a":1}'
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.json"]


def test_it_keeps_the_previous_content_as_bak(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    write_atomically(target, b"first")
    write_atomically(target, b"second")
    write_atomically(target, b"third")
    assert target.read_bytes() == b"third"
    assert (tmp_path / "a.json.bak").read_bytes() == b"second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "a.json.bak"]


def test_it_overwrites_a_tmp_file_left_by_a_crash(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    write_atomically(target, b"good")
    (tmp_path / "a.json.tmp").write_bytes(b"half a wri")
    (tmp_path / "a.json.bak.tmp").write_bytes(b"junk")
    write_atomically(target, b"better")
    assert target.read_bytes() == b"better"
    assert (tmp_path / "a.json.bak").read_bytes() == b"good"
    assert not (tmp_path / "a.json.tmp").exists()
    assert not (tmp_path / "a.json.bak.tmp").exists()


# -- persist and load ----------------------------------------------------------------------


def test_it_round_trips_through_persist_and_load(path: Path) -> None:
    saved(path, a="1", b="two")
    assert loaded(path).notes == {"a": "1", "b": "two"}


def test_it_persists_indented_json(path: Path) -> None:
    saved(path, a="1")
    assert path.read_text() == '{\n  "notes": {\n    "a": "1"\n  }\n}'


def test_it_loads_nothing_when_there_is_no_file(path: Path) -> None:
    file = NotesFile(path)
    assert file.load() is False
    assert file.notes == {}


def test_it_ignores_a_leftover_tmp_file_from_a_crash_before_the_rename(path: Path) -> None:
    saved(path, a="last good")
    path.with_name("notes.json.tmp").write_bytes(b'{"notes": {"a": "new but never')
    assert loaded(path).notes == {"a": "last good"}


@pytest.mark.parametrize(
    "bad_main",
    [b"", b"  \n", b'{"notes": {"a": "tru', b"\x00\x00\x00\x00", b"[1, 2]", b'{"notes": {"a": 5}}'],
    ids=["empty", "blank", "truncated", "zeros", "not-an-object", "does-not-decode"],
)
def test_it_falls_back_to_the_bak_file_when_the_main_file_is_bad(
    path: Path, bad_main: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    saved(path, a="older")
    saved(path, a="newer")
    path.write_bytes(bad_main)
    with caplog.at_level(logging.WARNING, logger="broker_core.store.configfile"):
        assert loaded(path).notes == {"a": "older"}
    assert any(str(path) in r.getMessage() and "unusable" in r.getMessage() for r in caplog.records)


def test_it_loads_the_bak_file_when_the_main_file_is_missing(path: Path) -> None:
    saved(path, a="older")
    saved(path, a="newer")
    path.unlink()
    assert loaded(path).notes == {"a": "older"}


def test_it_sets_a_bad_main_file_aside_so_it_never_becomes_the_backup(path: Path) -> None:
    saved(path, a="older")
    saved(path, a="newer")
    path.write_bytes(b"garbage")
    file = loaded(path)
    assert path.with_name("notes.json.corrupt").read_bytes() == b"garbage"
    file.notes["b"] = "added"
    file.persist()
    assert path.with_name("notes.json.bak").read_bytes() != b"garbage"
    assert loaded(path).notes == {"a": "older", "b": "added"}


def test_it_keeps_the_table_when_both_files_are_bad(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"garbage")
    path.with_name("notes.json.bak").write_bytes(b"{")
    file = NotesFile(path)
    file.notes = {"kept": "yes"}
    with caplog.at_level(logging.ERROR, logger="broker_core.store.configfile"):
        assert file.load() is False
    assert file.notes == {"kept": "yes"}
    assert any(r.levelno == logging.ERROR for r in caplog.records)


def test_it_does_not_load_a_bak_file_that_fails_to_decode(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.with_name("notes.json.bak").write_bytes(b'{"notes": []}')
    assert NotesFile(path).load() is False


# -- fastjson's dialect ---------------------------------------------------------------------


def test_it_loads_a_fastjson_file_with_unquoted_integer_keys(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"offsetTable":{"T@g":{0:5,1:7},"U@g":{\n\t\t12 : 40\n}}}')
    offsets = ConsumerOffsetManager(tmp_path)
    assert offsets.load()
    assert offsets.offset_table == {"T@g": {0: 5, 1: 7}, "U@g": {12: 40}}


def test_it_does_not_mangle_strings_that_look_like_integer_keys() -> None:
    text = b'{"remark":"{1:2}, ,3:4 \\"{5:6}","t":{0:1},"s":"a\\\\",9:"{7:8}"}'
    assert parse_config_json(text) == {
        "remark": '{1:2}, ,3:4 "{5:6}',
        "t": {"0": 1},
        "s": "a\\",
        "9": "{7:8}",
    }


def test_it_leaves_integer_values_and_arrays_alone() -> None:
    assert quote_bare_int_keys(b'{"a":[1,2],"b":{3:4,-5:6}}') == b'{"a":[1,2],"b":{"3":4,"-5":6}}'


def test_it_rejects_json_that_is_not_an_object() -> None:
    with pytest.raises(ValueError, match="expected a JSON object"):
        parse_config_json(b"[]")


# -- DataVersion -----------------------------------------------------------------------------


def test_it_counts_versions_and_keeps_the_time_of_the_last_change() -> None:
    version = DataVersion(counter=0, timestamp=1)
    version.next_version(now=1000)
    version.next_version(now=2000)
    assert version.to_json() == {"counter": 2, "timestamp": 2000}
    assert DataVersion.from_json({"counter": 2, "timestamp": 2000, "stateVersion": 0}) == version


# -- a real crash ----------------------------------------------------------------------------

QUEUES = 400
PERSISTER = textwrap.dedent(
    """
    import sys
    from broker_core.store.offsets import ConsumerOffsetManager

    offsets = ConsumerOffsetManager(sys.argv[1])
    generation = 0
    while True:
        generation += 1
        for queue_id in range({queues}):
            offsets.commit_offset("127.0.0.1", "crashGroup", "CrashTopic", queue_id, generation)
        offsets.persist()
        if generation == 2:
            print("ready", flush=True)
    """
).format(queues=QUEUES)


@pytest.mark.parametrize("attempt", range(20))
def test_it_survives_being_killed_while_persisting(tmp_path: Path, attempt: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with subprocess.Popen(
        [sys.executable, "-c", PERSISTER, str(tmp_path)], stdout=subprocess.PIPE, env=env, text=True
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "ready\n"
            time.sleep(random.Random(attempt).uniform(0.0, 0.3))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()

    offsets = ConsumerOffsetManager(tmp_path)
    assert offsets.load()
    table = offsets.query_offsets("crashGroup", "CrashTopic")
    assert sorted(table) == list(range(QUEUES))
    assert len(set(table.values())) == 1, "a persisted table mixes two generations"
    assert next(iter(table.values())) >= 2
