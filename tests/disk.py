"""A small file system that a test fills itself, as another process filling the disk would.

``small_disk`` mounts a tmpfs of a few MiB (mounting needs root, which CI has; elsewhere
the tests that use it fail saying so) and ``fill`` takes every byte left on it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(directory: Path, size_mib: int) -> Iterator[Path]:
    """A tmpfs of ``size_mib`` MiB mounted on ``directory`` (created) for the block."""
    if os.geteuid() != 0:
        pytest.fail("the full-disk tests mount a small tmpfs: run them as root (CI does)")
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(directory)],
        check=True,
        capture_output=True,
    )
    try:
        yield directory
    finally:
        if subprocess.run(["umount", str(directory)], capture_output=True).returncode != 0:
            # Still in use (a test that failed with files open): detach it all the same.
            subprocess.run(["umount", "-l", str(directory)], capture_output=True)


def fill(directory: Path) -> Path:
    """Fill the file system holding ``directory`` to its last byte; return the filler file,
    whose removal gives the space back."""
    path = directory / "filler"
    chunk = bytes(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while chunk:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk = chunk[: len(chunk) // 2]  # what is left is smaller than a chunk
    finally:
        os.close(fd)
    assert os.statvfs(directory).f_bavail == 0
    return path
