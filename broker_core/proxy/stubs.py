"""The Python modules generated from the vendored .proto files, and how they are made.

``manage.py``'s install step runs ``python -m broker_core.proxy.stubs``; a checkout where
they are missing or older than the .proto files makes them on first import (grpcio-tools is
a dependency).  They go to ``_generated/`` beside this file (not in git): protoc's output
imports its siblings as ``apache.rocketmq.v2``, so that directory is put on ``sys.path``
first.  Nothing is encoded by hand.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
import threading
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
PROTOS = HERE / "protos"
GENERATED = HERE / "_generated"
SOURCES = ("apache/rocketmq/v2/definition.proto", "apache/rocketmq/v2/service.proto")
_STAMP = GENERATED / "sources.sha256"
_lock = threading.Lock()


def _digest() -> str:
    h = hashlib.sha256()
    for source in SOURCES:
        h.update((PROTOS / source).read_bytes())
    return h.hexdigest()


def generate(force: bool = False) -> Path:
    """Run protoc (grpcio-tools) over the vendored .proto files unless the output is current."""
    digest = _digest()
    if not force and _STAMP.exists() and _STAMP.read_text().strip() == digest:
        return GENERATED
    from grpc_tools import protoc  # the generator is only needed when something changed

    include = Path(protoc.__file__).resolve().parent / "_proto"  # google/protobuf/*.proto
    GENERATED.mkdir(exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTOS}",
        f"-I{include}",
        f"--python_out={GENERATED}",
        f"--pyi_out={GENERATED}",
        f"--grpc_python_out={GENERATED}",
        *[str(PROTOS / source) for source in SOURCES],
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTOS}: see its messages above")
    for package in (GENERATED / "apache", GENERATED / "apache/rocketmq", GENERATED / "apache/rocketmq/v2"):
        (package / "__init__.py").touch()
    _STAMP.write_text(digest + "\n")
    return GENERATED


def load() -> tuple[ModuleType, ModuleType, ModuleType]:
    """(definition_pb2, service_pb2, service_pb2_grpc), generated first when needed."""
    with _lock:
        generate()
        if str(GENERATED) not in sys.path:
            sys.path.insert(0, str(GENERATED))
    return (
        importlib.import_module("apache.rocketmq.v2.definition_pb2"),
        importlib.import_module("apache.rocketmq.v2.service_pb2"),
        importlib.import_module("apache.rocketmq.v2.service_pb2_grpc"),
    )


if __name__ == "__main__":
    print(f"stubs in {generate(force='--force' in sys.argv)}")
