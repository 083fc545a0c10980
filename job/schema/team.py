"""A team's own schema, without an edit of the project: a folder of .proto files, or a compiled
FileDescriptorSet at a URL (what the original platform's schema registry served).

Either is read when a dagger first starts; :func:`job.query.plan.pin_schema` then pins the version in
the checkpoint, and later starts run against the pinned copy.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from job.common.urls import read_url
from job.errors import SchemaError
from job.schema.compile import compile_descriptor_set
from job.schema.registry import SchemaRegistry

CACHE_DIR = Path(tempfile.gettempdir()) / "daggers-team-schemas"
"""Where compiled team folders go (named by their sources' hash), outside the project."""


def team_schema_from_dir(root: Path, out_dir: Path = CACHE_DIR) -> SchemaRegistry:
    """Return the schema of the .proto files under ``root`` (imports relative to it, plus Google's
    well-known types). Raises SchemaError for a missing folder or protoc's message."""
    if not root.is_dir():
        raise SchemaError(
            f"schema_dir {root} is not a folder", hint="a folder of .proto files, relative to the spec"
        )
    return SchemaRegistry(compile_descriptor_set(root, out_dir))


def team_schema_from_url(url: str) -> SchemaRegistry:
    """Return the schema in the FileDescriptorSet at ``url``. Raises SchemaError naming the URL."""
    try:
        data = read_url(url)
    except OSError as exc:
        raise SchemaError(
            f"schema_url: {exc}",
            hint="an http(s):// or file:// URL of a compiled descriptor set "
            "(daggers protos build --root DIR --out FILE)",
        ) from None
    try:
        return SchemaRegistry(data)
    except Exception as exc:  # a protobuf DecodeError or TypeError: not a descriptor set
        raise SchemaError(f"schema_url {url} is not a compiled FileDescriptorSet ({exc})") from None
