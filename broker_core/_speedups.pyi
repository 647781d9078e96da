"""Types of the optional C speedups (``_speedups.c``): the same contracts as their Python
twins in ``model/hashcode.py``, ``model/message.py``, ``store/commitlog.py`` and
``store/indexfile.py``, which say what each argument is.

Every function takes its arguments by position only (``METH_VARARGS``/``METH_FASTCALL``).
The buffers written into are the store's mapped segments (``mmap``); tests also pass
``bytearray``.
"""

from collections.abc import Callable
from mmap import mmap
from typing import TypeVar, overload

from broker_core.model.message import MessageInner

_T = TypeVar("_T")

# A buffer the C code writes records or index entries into.
_Writable = mmap | bytearray | memoryview
# A buffer the C code only reads.
_Readable = bytes | bytearray | memoryview | mmap
# (topic, key, commit-log offset, store timestamp ms): one key of one record for the index.
_IndexItem = tuple[str, str, int, int]
# (item offset, body length, properties length, flag) of one item of an encoded batch.
_BatchItem = tuple[int, int, int, int]

def java_hash_code(text: str, /) -> int:
    """Java's ``text.hashCode()`` as a signed 32-bit int (``hashcode.py_java_hash_code``)."""

def index_put_many(
    buffer: _Writable,
    slots: int,
    index_num: int,
    count: int,
    slot_count: int,
    begin_ts: int,
    items: list[_IndexItem],
    start: int,
    /,
) -> tuple[int, int, int]:
    """Put ``items[start:]`` into an index file; return (count, slot count, items done)."""

def write_records(
    buffer: _Writable,
    pos: int,
    base_phys: int,
    store_ts: int,
    store_host: bytes,
    msgs: list[MessageInner],
    queue_offsets: list[int],
    /,
) -> int:
    """Write prepared IPv4 records back to back from ``pos``; return the end position."""

def batch_items(encoded: bytes, max_body: int, /) -> tuple[list[_BatchItem], int]:
    """Split an encoded batch (``message.decode_batch``); also return the largest payload."""

def write_batch(
    buffer: _Writable,
    pos: int,
    base_phys: int,
    store_ts: int,
    store_host: bytes,
    born_host: bytes,
    born_ts: int,
    sys_flag: int,
    queue_id: int,
    first_queue_offset: int,
    topic: str,
    topic_field: bytes,
    encoded: bytes,
    items: list[_BatchItem],
    crc: Callable[[memoryview], int],
    /,
) -> tuple[int, bytes, tuple[int, ...], list[_IndexItem]]:
    """Write a batch's items as records: (end position, packed consume-queue entries,
    each record's commit-log offset, index items)."""

@overload
def decode_records(
    buf: _Readable, cls: type[_T], with_body: bool = ..., pos: int = ..., max_count: int = ..., /
) -> tuple[list[_T], tuple[int, str] | None]: ...
@overload
def decode_records(
    buf: _Readable, cls: None = ..., with_body: bool = ..., pos: int = ..., max_count: int = ..., /
) -> tuple[list[tuple[object, ...]], tuple[int, str] | None]:
    """Decode records laid back to back: (instances of ``cls``, or tuples of MessageExt's
    fields, and None) or (the records before a bad one, (its position, why))."""

def decode_command(buf: _Readable, start: int, end: int, cls: type[_T], /) -> _T | None:
    """The frame in ``buf[start:end]`` (after its length prefix) as ``cls(code, language,
    version, opaque, flag, remark, ext_fields, body)`` when its header is JSON in the usual
    shape; None hands it to ``command._decode``'s Python path."""

def scan_records(
    buf: _Readable, pos: int, limit: int, base_phys: int, delay_topic: bytes, delay_levels: tuple[int, ...], /
) -> tuple[int, list[tuple[str, int, int, int, bytes, int, int, int]], list[_IndexItem]]:
    """A slave's whole records from ``pos``: (where it stopped, runs of one queue's
    consecutive records (topic, queue id, first queue offset, count, packed consume-queue
    entries, first offset, end offset, last store time), index items)."""
