"""The broker's JSON config files and how they are written without ever being half-written.

Each file under ``<store root>/config/`` (``topics.json``, ``subscriptionGroup.json``,
``consumerOffset.json``, ...) belongs to one manager class built on ``ConfigFile``.  On
disk a file may have up to three companions::

    <name>.json        the current content
    <name>.json.bak    the content the previous successful write replaced
    <name>.json.tmp    a write in progress (only after a crash: it is never read)

Crash policy: ``write_atomically`` fsyncs the new bytes to ``.tmp`` before anything else
changes, hard-links the current file to ``.bak``, then renames ``.tmp`` over the file and
fsyncs the directory.  A crash at any point leaves the file either wholly old or wholly
new, and ``load`` falls back to ``.bak`` whenever the file is missing, empty or does not
decode.  A full disk is a state, not a crash: a write it refuses changes nothing on disk,
and ``ConfigFile`` reports it once per episode.  Files written by the Java broker
(fastjson, which leaves integer map keys unquoted: ``{"T@g":{0:5}}``) are accepted on
load; what Quiver writes is plain JSON.

Thread-safety: a manager's table is guarded by ``ConfigFile._lock``; ``persist`` takes a
snapshot under it and writes outside it, so a slow fsync never blocks readers or writers
of the table.  One process (the broker) owns the files.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypedDict, TypeVar

import orjson

from broker_core.clock import wall_clock_ms as now_ms
from broker_core.errors import MessageIllegalError, StoreError
from broker_core.model.jsonfields import json_int, json_object

log = logging.getLogger(__name__)

CONFIG_DIR = "config"
TMP_SUFFIX = ".tmp"
BAK_SUFFIX = ".bak"
CORRUPT_SUFFIX = ".corrupt"

Clock = Callable[[], int]
"""Returns the current wall-clock time in milliseconds."""


def config_path(store_root: str | os.PathLike[str], file_name: str) -> Path:
    """Return ``<store root>/config/<file_name>``."""
    return Path(store_root) / CONFIG_DIR / file_name


# -- atomic writes -----------------------------------------------------------------------


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace the file at ``path`` with ``data`` so that no crash can leave it half-written.

    The previous content, if any, is kept as ``<path>.bak``.  The parent directory is
    created when missing.  Raises ``OSError`` when the disk refuses; the file at ``path``
    is then untouched and no temporary file is left behind.
    """
    target = Path(path)
    tmp = target.with_name(target.name + TMP_SUFFIX)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        _keep_backup(target, target.with_name(target.name + BAK_SUFFIX))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a partial write would hold on to space the disk lacks
        raise
    _fsync_directory(target.parent)


def _keep_backup(target: Path, bak: Path) -> None:
    # The current file stays in place until the rename replaces it, so a reader (or a
    # crash) never sees it missing; the backup is swapped in whole, by rename, as well.
    staging = bak.with_name(bak.name + TMP_SUFFIX)
    staging.unlink(missing_ok=True)
    try:
        os.link(target, staging)
    except FileNotFoundError:
        return  # first write: nothing to keep
    except OSError:
        # A filesystem without hard links: copy instead.
        try:
            shutil.copyfile(target, staging)
            with open(staging, "rb+") as copy:
                os.fsync(copy.fileno())
        except BaseException:
            staging.unlink(missing_ok=True)
            raise
    os.replace(staging, bak)


def _fsync_directory(directory: Path) -> None:
    # Makes the renames durable; without it a power loss may undo them.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- reading, including fastjson's dialect ------------------------------------------------

# A JSON string (skipped whole, so nothing inside one is touched) or an unquoted integer
# in key position: right after "{" or "," and followed by ":".
_STRING_OR_BARE_KEY = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|([{,]\s*)(-?\d+)(\s*:)', re.DOTALL)


def quote_bare_int_keys(text: bytes) -> bytes:
    """Return ``text`` with fastjson's unquoted integer object keys put in quotes.

    ``{"T@g":{0:5,1:7}}`` becomes ``{"T@g":{"0":5,"1":7}}``; digits inside strings
    (``"{1:2}"``) and in value position are left alone.
    """

    def fix(match: re.Match[bytes]) -> bytes:
        if match.group(1) is None:
            return match.group(0)
        return match.group(1) + b'"' + match.group(2) + b'"' + match.group(3)

    return _STRING_OR_BARE_KEY.sub(fix, text)


def parse_config_json(data: bytes) -> dict[str, Any]:
    """Parse a config file's bytes (plain JSON or fastjson's dialect) into a dict.

    Raises ``ValueError`` when the bytes are not a JSON object.
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        # Only fastjson files need the rewrite; valid JSON never pays for it.
        obj = orjson.loads(quote_bare_int_keys(data))
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, found {type(obj).__name__}")
    return obj


# -- data version ------------------------------------------------------------------------


class DataVersionJson(TypedDict):
    counter: int
    timestamp: int


@dataclass
class DataVersion:
    """How many times a table changed, and when it last did (RocketMQ ``DataVersion``).

    Brokers send it with their registration so a nameserver can tell whether the topic
    table changed; the counter only ever grows.  Not thread-safe: its owner's lock guards it.
    """

    counter: int = 0
    timestamp: int = 0  # ms since the epoch

    def next_version(self, now: int) -> None:
        """Record one more change, made at ``now`` (ms)."""
        self.counter += 1
        self.timestamp = now

    def copy(self) -> DataVersion:
        return DataVersion(self.counter, self.timestamp)

    def to_json(self) -> DataVersionJson:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> DataVersion:
        """Build from ``{"counter":..,"timestamp":..}``; other keys (``stateVersion``) are ignored."""
        return cls(json_int(obj, "counter", 0), json_int(obj, "timestamp", 0))


# -- the base class ----------------------------------------------------------------------


class ConfigFile(ABC):
    """A table kept in memory and saved as one JSON file (RocketMQ ``ConfigManager``).

    Subclasses name their file (``config_file_path``) and convert their table to and from
    a JSON object (``encode``/``decode``); both are called with ``_lock`` held, which
    subclasses also take around every change to their table.

    A write the disk refuses is logged as one WARNING when the file first fails and one
    INFO line when it is written again; the attempts in between log nothing.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._persist_lock = threading.Lock()
        self._written: bytes | None = None  # what the last successful persist wrote
        self._failing = False  # the last persist could not write the file

    @property
    @abstractmethod
    def config_file_path(self) -> Path:
        """Where the file lives (normally ``<store root>/config/<name>.json``)."""

    @abstractmethod
    def encode(self) -> dict[str, Any]:
        """Return the table as a JSON-serialisable object."""

    @abstractmethod
    def decode(self, obj: dict[str, Any]) -> None:
        """Replace the table with the one in ``obj``.

        All or nothing: build the new table completely, then assign it, so that a file
        that fails to decode (ValueError, TypeError, KeyError) leaves the table as it was.
        """

    def load(self) -> bool:
        """Load the file, or its ``.bak`` when the file is missing, empty or unreadable.

        Returns True when one of them was loaded, False when neither exists or neither is
        usable (logged as an error).  A bad main file is renamed to ``<name>.corrupt`` so
        the next ``persist`` cannot turn it into the backup.
        """
        main = self.config_file_path
        bak = main.with_name(main.name + BAK_SUFFIX)
        with self._persist_lock, self._lock:
            self._written = None  # the file may hold anything now: the next persist writes
            problem = self._load_from(main)
            if problem is None:
                log.info("loaded %s", main)
                return True
            if problem != "missing":
                log.warning("%s is unusable (%s); trying %s", main, problem, bak)
            bak_problem = self._load_from(bak)
            if bak_problem is None:
                log.info("loaded %s", bak)
                if problem != "missing":
                    self._set_aside(main)
                return True
            if problem != "missing" or bak_problem != "missing":
                log.error("neither %s (%s) nor %s (%s) could be loaded", main, problem, bak, bak_problem)
            return False

    def persist(self) -> None:
        """Write the table to its file atomically (the previous content becomes ``.bak``).

        Nothing is written when the table is what this object last wrote.  Raises
        ``StoreError`` when the file cannot be written (the old file is kept as it was).
        """
        path = self.config_file_path
        with self._persist_lock:
            with self._lock:
                obj = self.encode()
            data = orjson.dumps(obj, option=orjson.OPT_INDENT_2)
            if data == self._written:
                return
            try:
                write_atomically(path, data)
            except OSError as exc:
                reason = exc.strerror or str(exc)
                if not self._failing:
                    self._failing = True
                    log.warning("cannot write %s (%s): the previous file is kept; retrying", path, reason)
                raise StoreError(f"cannot write {path}: {reason}") from exc
            self._written = data
            if self._failing:
                self._failing = False
                log.info("%s is written again", path)

    def copy_from(self, obj: dict[str, Any]) -> bool:
        """Take the table in ``obj`` (a master's, as its GET_ALL_* answer encodes it) in
        place of this one, and persist it; return whether anything changed.

        A slave keeps its master's topics, groups and offsets this way.  Raises what
        ``decode`` raises for a malformed table (this one is kept as it was).
        """
        with self._lock:
            before = self.encode()
            self.decode(obj)
            changed = self.encode() != before
        if changed:
            self.try_persist()
        return changed

    def try_persist(self) -> bool:
        """``persist`` for writers that try again later: False, not an error, when the file
        cannot be written (``persist`` has logged it)."""
        try:
            self.persist()
        except StoreError:
            return False
        return True

    def _load_from(self, path: Path) -> str | None:
        """Decode ``path`` into the table; return None on success, else what was wrong."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return "missing"
        except OSError as exc:
            return f"unreadable: {exc}"
        if not data.strip():
            return "empty"
        try:
            self.decode(parse_config_json(data))
        except (ValueError, TypeError, KeyError) as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    @staticmethod
    def _set_aside(path: Path) -> None:
        corrupt = path.with_name(path.name + CORRUPT_SUFFIX)
        try:
            os.replace(path, corrupt)
        except OSError as exc:
            log.warning("could not move %s aside to %s: %s", path, corrupt, exc)
        else:
            log.warning("moved unusable %s aside to %s", path, corrupt)


# -- a versioned table of named configs -------------------------------------------------


class NamedConfig(Protocol):
    """What a table entry offers: its JSON form and, when invalid, why."""

    def to_json(self) -> Mapping[str, Any]: ...

    def problem(self) -> str | None: ...


C = TypeVar("C", bound=NamedConfig)


class VersionedConfigTable(ConfigFile, Generic[C]):
    """Named configs with a data version, saved as ``{"dataVersion": .., TABLE_KEY: {name: config}}``.

    The shape of RocketMQ's ``topics.json`` and ``subscriptionGroup.json``.  Subclasses set
    ``FILE_NAME``, ``TABLE_KEY``, ``NAME_KEY`` (the entry's own name field in JSON) and
    ``KIND`` (for messages), and say how to name and parse an entry.  Every change moves the
    data version (brokers re-register when it does) and persists the file.
    """

    FILE_NAME: ClassVar[str]
    TABLE_KEY: ClassVar[str]
    NAME_KEY: ClassVar[str]
    KIND: ClassVar[str]

    def __init__(self, store_root: str | os.PathLike[str], *, clock: Callable[[], int] = now_ms) -> None:
        super().__init__()
        self._path = config_path(store_root, self.FILE_NAME)
        self._clock = clock
        self._table: dict[str, C] = {}
        self._data_version = DataVersion(0, clock())

    @staticmethod
    @abstractmethod
    def name_of(config: C) -> str:
        """The entry's name (its key in the table)."""

    @staticmethod
    @abstractmethod
    def config_from_json(obj: Mapping[str, Any]) -> C:
        """Parse one entry (raise ValueError/TypeError/KeyError when malformed)."""

    @property
    def config_file_path(self) -> Path:
        return self._path

    @property
    def data_version(self) -> DataVersion:
        """A copy of the version, which moves on every change to the table."""
        with self._lock:
            return self._data_version.copy()

    def get(self, name: str) -> C | None:
        with self._lock:
            return self._table.get(name)

    def contains(self, name: str) -> bool:
        with self._lock:
            return name in self._table

    __contains__ = contains

    def all(self) -> dict[str, C]:
        """A copy of the table."""
        with self._lock:
            return dict(self._table)

    def update(self, config: C) -> None:
        """Create or replace an entry and persist the table.

        Raises ``MessageIllegalError`` saying what is wrong with an invalid config, and
        ``StoreError`` when the file cannot be written.
        """
        self._validate(config)
        with self._lock:
            self._table[self.name_of(config)] = config
            self._data_version.next_version(self._clock())
        self.persist()

    def ensure(self, config: C) -> bool:
        """Add ``config`` unless an entry of that name exists; return whether it was added.

        An existing entry keeps its config: an operator may have changed it.  Entries made
        on demand (auto-created topics and groups) must not fail the request that made
        them: when the disk refuses the file, the entry is kept in memory and written with
        the table's next successful persist.
        """
        self._validate(config)
        with self._lock:
            if self.name_of(config) in self._table:
                return False
            self._table[self.name_of(config)] = config
            self._data_version.next_version(self._clock())
        self.try_persist()
        return True

    def next_version(self) -> None:
        """Move the data version on though no entry changed (what the entries mean did:
        a new broker permission), so nameservers take the table again."""
        with self._lock:
            self._data_version.next_version(self._clock())
        self.persist()

    def delete(self, name: str) -> bool:
        """Remove an entry and persist the table; return whether it existed."""
        with self._lock:
            if self._table.pop(name, None) is None:
                return False
            self._data_version.next_version(self._clock())
        self.persist()
        return True

    def encode(self) -> dict[str, Any]:
        return {
            "dataVersion": self._data_version.to_json(),
            self.TABLE_KEY: {name: self._table[name].to_json() for name in sorted(self._table)},
        }

    def decode(self, obj: dict[str, Any]) -> None:
        table: dict[str, C] = {}
        for name, raw in json_object(obj, self.TABLE_KEY).items():
            if not isinstance(raw, dict):
                raise ValueError(f"config of {self.KIND} {name!r} must be a JSON object")
            config = self.config_from_json({self.NAME_KEY: name, **raw})
            table[self.name_of(config)] = config
        version = DataVersion.from_json(json_object(obj, "dataVersion"))
        self._table = table
        self._data_version = version

    @staticmethod
    def _validate(config: C) -> None:
        problem = config.problem()
        if problem is not None:
            raise MessageIllegalError(problem)
