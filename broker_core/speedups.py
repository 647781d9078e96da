"""Whether the compiled helpers (``_speedups.c``) are used: the one place that decides.

The install compiles ``broker_core._speedups`` where a C compiler is present; every hot
path that has a C version (record writing and decoding, the index insert loop, Java's
``String.hashCode``, a slave's record scan, a frame's JSON header) also has a
pure-Python twin that the tests hold it to.  ``QUIVER_PURE_PYTHON=1`` in the environment
makes every process started with it run the pure-Python twins even where the module is
built, so the suite can prove the fallback correct on a machine that has a compiler
(``.ci/run`` runs the unit tests that way as well).  Read once, at import: a process
does not switch.
"""

from __future__ import annotations

import os
from types import ModuleType

PURE_PYTHON_ENV = "QUIVER_PURE_PYTHON"
"""Set to anything but ``""`` or ``"0"`` to leave the compiled module unused."""


def pure_python_requested() -> bool:
    """Whether the environment asks for the pure-Python paths."""
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def _load() -> ModuleType | None:
    if pure_python_requested():
        return None
    try:
        from broker_core import _speedups
    except ImportError:  # a machine without a compiler: the pure-Python twins
        return None
    return _speedups


compiled: ModuleType | None = _load()
"""The compiled module, or None when it is not built or ``QUIVER_PURE_PYTHON`` is set."""
