"""The C speedups agree with the pure-Python reference versions they replace."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.model import hashcode
from broker_core.speedups import pure_python_requested
from broker_core.store import commitlog, indexfile, replica

speedups = pytest.importorskip("broker_core._speedups")


def test_it_is_built_here_and_in_use_unless_switched_off() -> None:
    # The project's install compiles it on this machine; a silent fallback would hide a
    # broken build and make the benchmark figures meaningless.  QUIVER_PURE_PYTHON (the
    # suite's second pass) must really leave it unused.
    in_use = not pure_python_requested()
    assert hashcode.HAVE_SPEEDUPS is in_use
    assert (indexfile._c_put_many is not None) is in_use
    assert (commitlog._c_write_records is not None) is in_use
    assert (replica._c_scan_records is not None) is in_use


@given(st.text(max_size=80))
@settings(max_examples=500)
def test_it_hashes_any_text_like_the_python_version(text: str) -> None:
    assert speedups.java_hash_code(text) == hashcode.py_java_hash_code(text)


def test_it_hashes_known_java_values() -> None:
    assert speedups.java_hash_code("hello world") == 1794106052
    assert speedups.java_hash_code("") == 0
    # A code point above U+FFFF counts as two UTF-16 units, as in Java.
    assert speedups.java_hash_code("\U0001f600") == hashcode.py_java_hash_code("\U0001f600")


def test_it_refuses_what_is_not_text() -> None:
    with pytest.raises(TypeError):
        speedups.java_hash_code(b"bytes")  # type: ignore[arg-type]


@given(
    st.lists(
        st.tuples(st.sampled_from(["T", "Topic", "%RETRY%g"]), st.text(min_size=1, max_size=12)),
        min_size=1,
        max_size=60,
    )
)
@settings(max_examples=60, deadline=None)
def test_it_writes_index_files_byte_for_byte_like_put_key(
    tmp_path_factory: pytest.TempPathFactory, keys: list[tuple[str, str]]
) -> None:
    directory: Path = tmp_path_factory.mktemp("idx")
    fast = indexfile.IndexFile(directory / "20260101000000000", 7, 40, create=True)
    slow = indexfile.IndexFile(directory / "20260101000000001", 7, 40, create=True)
    items = [(topic, key, 1000 + i * 100, 1_700_000_000_000 + i * 700) for i, (topic, key) in enumerate(keys)]
    done = fast.put_items(items)
    for topic, key, phy, ts in items[:done]:
        assert slow.put_key(f"{topic}#{key}", phy, ts)
    assert done == min(len(items), 39)
    assert fast._mm[:] == slow._mm[:]
    fast.close()
    slow.close()


def test_it_writes_batches_byte_for_byte_like_the_python_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from broker_core.model.message import MessageInner
    from broker_core.store import commitlog

    def fill(directory: Path) -> bytes:
        log = commitlog.CommitLog(
            directory,
            64 * 1024,
            store_host=bytes([127, 0, 0, 1, 0, 0, 0x2A, 0x9F]),
            max_message_size=16 * 1024,
            clock_ms=lambda: 1_700_000_000_123,
            preallocate=False,
        )
        for batch in range(5):
            msgs = [
                MessageInner(
                    "Orders" if i % 2 else "Pay",
                    i % 3,
                    bytes([batch, i]) * (i + 1),
                    {"TAGS": f"t{i}", "KEYS": "k é"},
                    flag=i,
                    born_timestamp=1000 + i,
                    born_host=f"10.0.0.{i}:{5000 + i}",
                    reconsume_times=i % 2,
                )
                for i in range(7)
            ]
            log.append_batch(msgs)
        data = bytes(log.queue.files[0].mm[: log.queue.files[0].wrote_position])
        log.close()
        return data

    with_c = fill(tmp_path / "c")
    monkeypatch.setattr(commitlog, "_c_write_records", None)
    without_c = fill(tmp_path / "py")
    assert with_c == without_c
