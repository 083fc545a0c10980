"""Compile the ``.proto`` files of a folder with grpcio-tools' protoc.

Two outputs, both generated, never hand-edited, and rebuilt when a ``.proto`` changes:

* a ``FileDescriptorSet`` (with imports) that the engine ships to Spark executors inside the
  source options, so a job carries the exact schema version it was started with;
* ``*_pb2.py`` modules for people who want to import the classes (``daggers protos build``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from job.errors import SchemaError

PROTO_ROOT = Path(os.environ.get("DAGGERS_PROTOS", Path(__file__).resolve().parents[2] / "protos"))
GENERATED_DIR = Path(__file__).resolve().parent / "_generated"


def proto_files(root: Path) -> list[Path]:
    """Return the ``.proto`` files under ``root``, sorted; raise SchemaError when there are none."""
    files = sorted(p for p in root.rglob("*.proto") if p.is_file())
    if not files:
        raise SchemaError(f"no .proto files under {root}")
    return files


def source_hash(root: Path) -> str:
    """Return a short hash of every ``.proto`` file's path and content under ``root``."""
    digest = hashlib.sha256()
    for path in proto_files(root):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _protoc(root: Path, args: list[str]) -> None:
    import grpc_tools

    include = Path(grpc_tools.__file__).parent / "_proto"
    root = root.resolve()  # protoc runs in root: a relative root would not be found from there
    rel = [str(p.relative_to(root)) for p in proto_files(root)]
    # -P: protoc runs in root, and `python -m` would import a grpc_tools.py found there
    cmd = [sys.executable, "-P", "-m", "grpc_tools.protoc", f"-I{root}", f"-I{include}", *args, *rel]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=root)
    if done.returncode != 0:
        raise SchemaError(f"protoc could not compile {root}:\n{done.stderr.strip()}")


def compile_descriptor_set(root: Path = PROTO_ROOT, out_dir: Path = GENERATED_DIR) -> bytes:
    """Return the serialized FileDescriptorSet for ``root``, compiling it if the sources changed.

    Raises SchemaError with protoc's message (file, line, column) when a file does not compile.
    """
    out_dir = out_dir.resolve()  # protoc runs in root: a relative out path would land there
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"descriptors-{source_hash(root)}.pb"
    if not target.exists():
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        _protoc(root, [f"--descriptor_set_out={tmp}", "--include_imports", "--include_source_info"])
        tmp.replace(target)
    return target.read_bytes()


def generate_python(root: Path = PROTO_ROOT, out_dir: Path = GENERATED_DIR / "python") -> list[Path]:
    """Generate ``*_pb2.py`` and ``*_pb2.pyi`` under ``out_dir``; return the generated modules."""
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    _protoc(root, [f"--python_out={out_dir}", f"--pyi_out={out_dir}"])
    return sorted(out_dir.rglob("*_pb2.py"))
