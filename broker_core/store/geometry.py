"""The store's geometry: the settings that shape its files, recorded with the files.

A commit-log segment's size decides where every record of the log may start; a consume
queue file's size decides which file holds which queue offset; the index sizes decide the
layout inside an index file.  A store written with one geometry and read with another is
misread, and a reader that "fixes" the difference by resizing or cutting files destroys
data.  So the geometry is written to ``<root>/geometry.json`` when the store is created,
and every reader (the broker, ``store check``, ``store rebuild``, the offline tools) takes
it from there:

* a broker whose config disagrees with the recorded geometry is refused at start, with a
  sentence naming both values (``StoreGeometryError``);
* a tool that has no config of its own (``store check``) adopts the recorded geometry.

A store created before this file existed has its geometry inferred from its files (every
commit-log segment is one segment size, every consume-queue file one file size) and
recorded at the next open; index sizes that cannot be inferred are taken from the config
when the index files' size matches it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from broker_core.config import StoreConfig
from broker_core.errors import ConfigError
from broker_core.store.indexfile import index_file_size

GEOMETRY_FILE = "geometry.json"
FORMAT_VERSION = 1

# Field of StoreConfig -> the broker.conf key an operator would set.
_KEYS = {
    "mapped_file_size_commit_log": "mappedFileSizeCommitLog",
    "mapped_file_size_consume_queue": "mappedFileSizeConsumeQueue",
    "max_hash_slot_num": "maxHashSlotNum",
    "max_index_num": "maxIndexNum",
}


class StoreGeometryError(ConfigError):
    """The config disagrees with the geometry recorded in (or inferred from) the store."""


@dataclass(frozen=True)
class StoreGeometry:
    """The file-shaping settings of one store, under their StoreConfig field names."""

    mapped_file_size_commit_log: int
    mapped_file_size_consume_queue: int
    max_hash_slot_num: int
    max_index_num: int

    @classmethod
    def of(cls, config: StoreConfig) -> StoreGeometry:
        return cls(**{name: getattr(config, name) for name in _KEYS})

    def to_json(self) -> dict[str, int]:
        return {"formatVersion": FORMAT_VERSION, **{key: getattr(self, name) for name, key in _KEYS.items()}}

    @classmethod
    def from_json(cls, data: dict[str, object], path: Path) -> StoreGeometry:
        values = {}
        for name, key in _KEYS.items():
            value = data.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise StoreGeometryError(f"{path}: {key} is missing or not a positive integer ({value!r})")
            values[name] = value
        return cls(**values)

    def differences(self, config: StoreConfig) -> list[str]:
        """One phrase per setting where ``config`` disagrees with this geometry."""
        return [
            f"{key} = {getattr(config, name)} (the store's files were made with {getattr(self, name)})"
            for name, key in _KEYS.items()
            if getattr(config, name) != getattr(self, name)
        ]

    def apply(self, config: StoreConfig) -> StoreConfig:
        """``config`` with this geometry's values."""
        return dataclasses.replace(config, **{name: getattr(self, name) for name in _KEYS})


def read_geometry(root: Path) -> StoreGeometry | None:
    """The geometry recorded in ``root`` (None when there is no record)."""
    path = root / GEOMETRY_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise StoreGeometryError(
            f"{path} is not valid JSON ({exc}): restore it, or delete it to have it inferred"
        ) from None
    if not isinstance(data, dict):
        raise StoreGeometryError(f"{path} does not hold a JSON object")
    return StoreGeometry.from_json(data, path)


def write_geometry(root: Path, geometry: StoreGeometry) -> None:
    """Record ``geometry`` in ``root`` atomically (temp file, fsync, rename)."""
    path = root / GEOMETRY_FILE
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(json.dumps(geometry.to_json(), indent=2).encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _one_size(files: list[Path], what: str) -> int | None:
    sizes = {p.stat().st_size for p in files}
    if len(sizes) > 1:
        raise StoreGeometryError(
            f"{what} files have different sizes ({', '.join(str(s) for s in sorted(sizes))} bytes): "
            "the store's geometry cannot be inferred; restore geometry.json"
        )
    return sizes.pop() if sizes else None


def infer_geometry(root: Path, config: StoreConfig) -> StoreGeometry | None:
    """The geometry of a store with files but no record; None when it has no files yet."""
    segments = sorted(p for p in (root / "commitlog").glob("[0-9]" * 20) if p.is_file())
    queue_files = [p for p in (root / "consumequeue").glob("*/*/" + "[0-9]" * 20) if p.is_file()]
    index_files = [p for p in (root / "index").glob("[0-9]" * 17) if p.is_file()]
    if not segments and not queue_files and not index_files:
        return None
    geometry = StoreGeometry.of(config)
    commit = _one_size(segments, f"{root / 'commitlog'}: commit-log")
    queue = _one_size(queue_files, f"{root / 'consumequeue'}: consume-queue")
    index = _one_size(index_files, f"{root / 'index'}: index")
    if commit is not None:
        geometry = dataclasses.replace(geometry, mapped_file_size_commit_log=commit)
    if queue is not None:
        geometry = dataclasses.replace(geometry, mapped_file_size_consume_queue=queue)
    if index is not None and index != index_file_size(geometry.max_hash_slot_num, geometry.max_index_num):
        raise StoreGeometryError(
            f"{root / 'index'}: index files are {index} bytes, which maxHashSlotNum = "
            f"{geometry.max_hash_slot_num} and maxIndexNum = {geometry.max_index_num} do not give; "
            "set the values the store was made with"
        )
    return geometry


def resolve_geometry(config: StoreConfig, *, adopt: bool) -> tuple[StoreConfig, StoreGeometry | None]:
    """The config to open ``config.root`` with, and the geometry found there (None: new store).

    With ``adopt`` the store's geometry replaces the config's; otherwise a difference is
    refused with StoreGeometryError.  Reads only: ``MessageStore.open`` records the result.
    """
    root = config.root
    found = read_geometry(root)
    if found is None:
        found = infer_geometry(root, config)
    if found is None:
        return config, None
    if adopt:
        return found.apply(config), found
    differences = found.differences(config)
    if differences:
        raise StoreGeometryError(
            f"the store at {root} was made with other file sizes than this config sets: "
            + "; ".join(differences)
            + ". A store's file sizes never change: set the store's values in the config, "
            "or give this config a new storePathRootDir"
        )
    return config, found
