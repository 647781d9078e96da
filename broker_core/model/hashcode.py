"""Java ``String.hashCode`` in Python: RocketMQ hashes tags and index keys with it.

h = sum(u[i] * 31**(n-1-i)) over the string's UTF-16 code units, wrapped to a signed
32-bit int.  The ASCII fast path multiplies the bytes by precomputed powers in C
(``map(operator.mul, ...)``) instead of looping in Python.  The dispatcher hashes one or
two index keys per message, so the C version in ``_speedups.c`` is used when it was
built; this module's Python version is the reference it is tested against.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from operator import mul
from struct import unpack

from broker_core.speedups import compiled

_MASK = 0xFFFFFFFF
_POWERS: dict[int, tuple[int, ...]] = {}


def _powers(n: int) -> tuple[int, ...]:
    table = _POWERS.get(n)
    if table is None:
        table = tuple(pow(31, n - 1 - i, 1 << 32) for i in range(n))
        _POWERS[n] = table
    return table


def py_java_hash_code(text: str) -> int:
    """Return Java's ``text.hashCode()`` as a signed 32-bit int (reference version)."""
    if text.isascii():
        units: bytes | tuple[int, ...] = text.encode("ascii")
    else:
        raw = text.encode("utf-16-be")
        units = unpack(f">{len(raw) // 2}H", raw)
    # operator.mul is untyped to mypy: the products of ints are ints.
    h: int = sum(map(mul, units, _powers(len(units)))) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


# The C version where it is built and not switched off (``broker_core.speedups``).
java_hash_code: Callable[[str], int] = py_java_hash_code if compiled is None else compiled.java_hash_code

HAVE_SPEEDUPS = java_hash_code is not py_java_hash_code


@lru_cache(maxsize=8192)
def tags_code(tags: str | None) -> int:
    """Consume-queue tag hash for a TAGS property value (0 for no tag).

    Cached: applications use a handful of tags, and every message is hashed.
    """
    if not tags:
        return 0
    return java_hash_code(tags)


def index_key_hash(key: str) -> int:
    """Non-negative hash of an index key, as RocketMQ's ``IndexFile.indexKeyHashMethod``.

    ``abs(hashCode)``, with ``Integer.MIN_VALUE`` (whose abs overflows) mapped to 0.
    """
    h = java_hash_code(key)
    if h == -(1 << 31):
        return 0
    return -h if h < 0 else h
