"""Files prepared ahead: a roll takes the next file as soon as it exists, not once it is warm."""

from __future__ import annotations

import fcntl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker_core.store import mappedfile
from broker_core.store.mappedfile import MappedFile
from broker_core.store.mappedfilequeue import MappedFileQueue

FILE_SIZE = 64 * 1024


@pytest.fixture
def slow_warm(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Make every warm-up hang until the returned event is set (a gigabyte on a slow VM)."""
    release = threading.Event()
    warm = MappedFile.warm

    def held_warm(self: MappedFile) -> None:
        assert release.wait(10), "the test never released the warm-up"
        warm(self)

    monkeypatch.setattr(MappedFile, "warm", held_warm)
    yield release
    release.set()


def fill(queue: MappedFileQueue) -> MappedFile:
    mf = queue.last_for_write()
    mf.wrote_position = mf.file_size
    return mf


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` passes (no wall-clock assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.001)
    return condition()


def test_a_roll_takes_the_next_file_while_its_warm_up_is_still_going(
    tmp_path: Path, slow_warm: threading.Event
) -> None:
    queue = MappedFileQueue(tmp_path, FILE_SIZE, preallocate=True, warm=True)
    queue.prepare_ahead()  # file 0
    first = fill(queue)
    queue.prepare_next_if_due()  # file 1, warm-up held
    assert not queue.wait_prepared(timeout=0.05)
    second = queue.last_for_write()  # does not wait for the warm-up
    assert second.file_from_offset == FILE_SIZE and second is not first
    assert [mf.file_from_offset for mf in queue.files] == [0, FILE_SIZE]
    second.append(b"written while the warm-up goes on")
    assert not queue.wait_prepared(timeout=0.05)  # the handed-over file is still warming
    slow_warm.set()
    assert queue.wait_prepared(timeout=5)
    assert bytes(second.mm[:7]) == b"written"
    for mf in queue.files:
        mf.close()


def test_preparing_the_file_after_does_not_mistake_an_earlier_warm_up_for_its_own(
    tmp_path: Path, slow_warm: threading.Event
) -> None:
    queue = MappedFileQueue(tmp_path, FILE_SIZE, preallocate=True, warm=True)
    queue.prepare_ahead()
    fill(queue)
    queue.prepare_next_if_due()
    fill(queue)  # file 1 taken (still warming) and full at once
    queue.prepare_next_if_due()  # file 2 requested while file 1 warms
    slow_warm.set()
    assert queue.wait_prepared(timeout=5)
    third = queue.last_for_write()
    assert third.file_from_offset == 2 * FILE_SIZE
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{n * FILE_SIZE:020d}" for n in range(3)]
    for mf in queue.files:
        mf.close()


def test_a_pending_file_is_removed_when_discarded(tmp_path: Path, slow_warm: threading.Event) -> None:
    queue = MappedFileQueue(tmp_path, FILE_SIZE, preallocate=True, warm=True)
    queue.prepare_ahead()
    assert queue._preallocator is not None
    threading.Timer(0.05, slow_warm.set).start()
    queue._preallocator.discard()  # waits for the warm-up to stop, then deletes the file
    assert list(tmp_path.iterdir()) == []
    assert queue.wait_prepared(timeout=1)


def test_a_late_request_for_a_file_the_writer_created_itself_is_ignored(tmp_path: Path) -> None:
    # The flusher read the last file (half written), then lost the GIL; the writer filled it
    # and rolled with nothing prepared, creating the next file itself.  The flusher's late
    # request for that offset must not reopen the live file (and discard must not delete it).
    queue = MappedFileQueue(tmp_path, FILE_SIZE, preallocate=True, warm=False)
    fill(queue)  # file 0, created by the writer
    live = queue.last_for_write()  # file 1, nothing prepared: created by the writer too
    live.append(b"acknowledged")
    assert queue._preallocator is not None
    queue._preallocator.request(FILE_SIZE)  # the late request
    assert queue._preallocator._current is None
    queue._preallocator.discard()
    assert live.path.exists() and bytes(live.mm[:12]) == b"acknowledged"
    queue.prepare_next_if_due()  # still prepares what comes next
    fill(queue)
    assert queue.last_for_write().file_from_offset == 2 * FILE_SIZE
    for mf in queue.files:
        mf.close()


def test_discard_leaves_a_file_that_a_roll_took_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = threading.Event()
    init = MappedFile.__init__

    def slow_create(self: MappedFile, *args: object, **kwargs: object) -> None:
        assert created.wait(10)
        init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(MappedFile, "__init__", slow_create)
    queue = MappedFileQueue(tmp_path, FILE_SIZE, preallocate=True, warm=False)
    queue.prepare_ahead()  # file 0 being created (held)
    assert queue._preallocator is not None
    prep = queue._preallocator._current
    assert prep is not None
    taken: list[MappedFile] = []
    taker = threading.Thread(target=lambda: taken.append(queue.last_for_write()))
    taker.start()
    assert wait_until(lambda: prep.claimed)  # the roll asked first
    discarder = threading.Thread(target=queue._preallocator.discard)
    discarder.start()
    created.set()
    taker.join(5)
    discarder.join(5)
    (live,) = taken
    assert live is prep.file
    assert not live.closed and live.path.exists()
    live.append(b"still usable")
    live.close()


def test_a_roll_during_a_discard_creates_its_own_file_after_the_old_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = threading.Event()
    init = MappedFile.__init__

    def slow_create(self: MappedFile, *args: object, **kwargs: object) -> None:
        if not created.is_set():  # only the preallocated file is held back
            assert created.wait(10)
        init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(MappedFile, "__init__", slow_create)
    queue = MappedFileQueue(tmp_path, FILE_SIZE, preallocate=True, warm=False)
    queue.prepare_ahead()  # file 0 being created (held)
    assert queue._preallocator is not None
    prep = queue._preallocator._current
    assert prep is not None
    discarder = threading.Thread(target=queue._preallocator.discard)
    discarder.start()
    assert wait_until(lambda: prep.discarding)  # the discard came first
    taken: list[MappedFile] = []
    taker = threading.Thread(target=lambda: taken.append(queue.last_for_write()))
    taker.start()
    created.set()
    discarder.join(5)
    taker.join(5)
    (live,) = taken
    assert live is not prep.file and prep.gone.is_set()
    assert not live.closed and live.path.exists()
    live.append(b"still usable")
    assert bytes(live.mm[:12]) == b"still usable"
    live.close()


def test_the_preallocator_never_opens_an_existing_file(tmp_path: Path) -> None:
    (tmp_path / f"{0:020d}").write_bytes(b"live data")
    queue = MappedFileQueue(tmp_path, FILE_SIZE, preallocate=True, warm=False)
    queue.prepare_ahead()  # no files loaded: asks for file 0, which exists
    assert queue.wait_prepared(timeout=5)
    assert queue._preallocator is not None and queue._preallocator.take(0) is None
    assert (tmp_path / f"{0:020d}").read_bytes()[:9] == b"live data"


def resident_pages(mapped_file: MappedFile) -> int:
    """How many of the file's mapped pages are in memory (mincore)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    pages = (mapped_file.file_size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vector = (ctypes.c_ubyte * pages)()
    anchor = ctypes.c_char.from_buffer(mapped_file.mm)
    try:
        assert (
            libc.mincore(
                ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(mapped_file.file_size), vector
            )
            == 0
        )
    finally:
        del anchor
    return sum(byte & 1 for byte in vector)


def test_a_new_small_file_is_used_at_once_and_warmed_in_the_background(tmp_path: Path) -> None:
    # A consume queue's new file: its writer does not wait for the warm-up (the first
    # message of a new queue used to wait 3-13 ms for it), and the warm-up still happens.
    size = 64 * 4096
    queue = MappedFileQueue(tmp_path / "cq", size, warm_new_files=True)
    mapped_file = queue.last_for_write()
    mapped_file.mm[:20] = b"e" * 20
    mapped_file.wrote_position = 20
    deadline = time.monotonic() + 10
    while resident_pages(mapped_file) < 64 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert resident_pages(mapped_file) == 64
    assert mapped_file.mm[:20] == b"e" * 20  # warming wrote nothing
    queue.close()


FS_IOC_FIEMAP = 0xC020660B
FIEMAP_EXTENT_UNWRITTEN = 0x800
# struct fiemap: start, length, flags, mapped extents, extent count, reserved
_FIEMAP_HEADER = struct.Struct("=QQIIII")
_FIEMAP_EXTENT = struct.Struct("=QQQQQIIII")  # logical, physical, length, reserved x2, flags, reserved x3


def unwritten_extents(path: Path, most: int = 512) -> int | None:
    """How many of the file's extents are allocated but never written (FIEMAP, without
    its sync flag, so dirty pages are not written out by asking), or None where the
    filesystem does not answer FIEMAP (tmpfs, say)."""
    request = bytearray(_FIEMAP_HEADER.size + most * _FIEMAP_EXTENT.size)
    _FIEMAP_HEADER.pack_into(request, 0, 0, 2**64 - 1, 0, 0, most, 0)
    with path.open("rb") as f:
        try:
            fcntl.ioctl(f.fileno(), FS_IOC_FIEMAP, request)
        except OSError:
            return None
    mapped = _FIEMAP_HEADER.unpack_from(request)[3]
    flags = (
        _FIEMAP_EXTENT.unpack_from(request, _FIEMAP_HEADER.size + i * _FIEMAP_EXTENT.size)[5]
        for i in range(mapped)
    )
    return sum(1 for flag in flags if flag & FIEMAP_EXTENT_UNWRITTEN)


def test_warming_a_file_writes_its_preallocated_extents_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # posix_fallocate leaves extents unwritten; their first writeback converts them in
    # the filesystem's journal, which doubled a SYNC_FLUSH group's msync, and the warm-up's
    # dirty zeros, left to the kernel, were written back in one burst half a minute later
    # (a 100 ms SYNC_FLUSH stall).  A warmed file is written out chunk by chunk instead.
    monkeypatch.setattr(mappedfile, "WARM_WRITE_OUT_CHUNK", 256 * 1024)  # several chunks
    mapped_file = MappedFile.create(tmp_path, 0, 4 * 1024 * 1024)
    before = unwritten_extents(mapped_file.path)
    if not before:
        mapped_file.close()
        pytest.skip("this filesystem does not keep preallocated extents unwritten (or says nothing)")
    mapped_file.mm[:20] = b"e" * 20  # an appender already at work
    mapped_file.wrote_position = 20
    mapped_file.warm()
    assert unwritten_extents(mapped_file.path) == 0
    assert mapped_file.mm[:20] == b"e" * 20
    assert mapped_file.mm[20:4096] == bytes(4096 - 20)
    mapped_file.close()
    assert (tmp_path / f"{0:020d}").read_bytes()[:20] == b"e" * 20


def test_warming_a_closed_file_does_nothing(tmp_path: Path) -> None:
    mapped_file = MappedFile.create(tmp_path, 0, 64 * 1024)
    mapped_file.close()
    mapped_file.warm()  # no error, no write into an unmapped file
    assert mapped_file.closed
