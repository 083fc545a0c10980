"""A spec's ``udf_file`` carried with it: the file's bytes as base64 in ``udf_file_base64`` (the field's rules).

Base64, because a spec's text is searched for ``${NAME}`` references and secrets, which Python code may look
like. A spec from a client is untrusted: the carried file is at most :data:`MAX_UDF_BYTES`, UTF-8 text, and its
name (``udf_file``) a relative path to a ``.py`` file with no ``..`` (:func:`carried_name_problem`). How it
travels: :mod:`job.control.udf_carry`.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import PurePosixPath

#: The largest udf_file a spec carries, in bytes (within the 256 KiB a spec's text may have, as base64).
MAX_UDF_BYTES = 128 * 1024
#: The longest name (``udf_file``) of a carried file, and its most folders and file: well within what a file
#: system takes under the controller's folder.
MAX_NAME_CHARS = 120
MAX_NAME_PARTS = 4
#: The spec's field that carries the file.
CARRIED = "udf_file_base64"
_SPACE_RE = re.compile(r"\s+")


def carried_name_problem(udf_file: str | None) -> str | None:
    """Return why ``udf_file`` cannot name a carried file (None when it can): it must be a relative path to a
    ``.py`` file with no ``..`` and no ``${NAME}``, so that it lands inside the folder it is written to."""
    if not udf_file:
        return "the spec names no udf_file for it to carry"
    path = PurePosixPath(udf_file)
    if len(udf_file) > MAX_NAME_CHARS or len(path.parts) > MAX_NAME_PARTS:
        return (
            f"udf_file is {len(udf_file):,} characters in {len(path.parts)} part"
            f"{'' if len(path.parts) == 1 else 's'}: a carried file's name is at "
            f"most {MAX_NAME_CHARS} characters in at most {MAX_NAME_PARTS} parts"
        )
    if (
        path.is_absolute()
        or udf_file.startswith("~")
        or ".." in path.parts
        or "${" in udf_file
        or "\\" in udf_file
        or "\x00" in udf_file
        or path.suffix != ".py"
    ):
        return (
            f"udf_file {udf_file!r} must name a .py file relative to the spec file's folder (no '..') to be "
            "carried with the spec"
        )
    return None


def decode_carried(value: str) -> bytes:
    """Return the file's bytes of a ``udf_file_base64`` value (whitespace ignored).

    Raises ValueError (the spec model names the field) when it is no base64, is larger than
    :data:`MAX_UDF_BYTES` or is no UTF-8 text."""
    compact = _SPACE_RE.sub("", value)
    if len(compact) > (MAX_UDF_BYTES + 2) // 3 * 4:
        raise ValueError(f"the file it carries is larger than {MAX_UDF_BYTES // 1024} KiB")
    try:
        content = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            "is not base64 (the content of udf_file, which daggers dagger create adds)"
        ) from None
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the file it carries is not UTF-8 text") from None
    return content


def encode_carried(content: bytes) -> str:
    """Return ``content`` as a ``udf_file_base64`` value: base64 in lines of 76 characters."""
    text = base64.b64encode(content).decode("ascii")
    return "".join(text[i : i + 76] + "\n" for i in range(0, len(text), 76))
