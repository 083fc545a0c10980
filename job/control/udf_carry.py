"""A dagger's ``udf_file`` travels with its spec: from the file beside the user's spec into the registry's text
(``udf_file_base64``), and from there into the dagger's folder on its controller's host.

The control plane keeps a spec as its text, and a controller runs it on another host, where no file beside the
user's spec exists. So ``daggers dagger create/edit/validate`` read the ``udf_file`` named relative to the spec
file and add its content to the text (:func:`attach_udf`); a controller writes it into the dagger's own folder
(:func:`write_carried_udf`) and runs the spec on that copy. The field's rules (size, name, encoding) are
:mod:`job.spec.udf_carried`'s; a server never reads a file a spec names.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from job.control.specs import dump, raw_spec
from job.errors import SpecError
from job.spec.udf_carried import CARRIED, MAX_UDF_BYTES, carried_name_problem, decode_carried, encode_carried

if TYPE_CHECKING:
    from job.spec import DaggerSpec


def read_udf_beside(spec_path: Path, udf_file: str) -> bytes:
    """Return the bytes of ``udf_file`` (relative to ``spec_path``'s folder) to carry with the spec.

    Raises SpecError naming udf_file when it is missing, too large or not UTF-8 text."""
    file = spec_path.parent / udf_file
    if not file.is_file():
        raise SpecError(
            f"udf_file: no file at {file}",
            hint="udf_file is relative to the spec file's folder; its content travels with the spec",
        )
    size = file.stat().st_size
    if size > MAX_UDF_BYTES:
        raise SpecError(
            f"udf_file: {file} is {size:,} bytes, over the {MAX_UDF_BYTES:,} bytes a spec carries",
            hint="keep a dagger's own functions small, or install them on the controller's host and name "
            "them with an absolute udf_file there",
        )
    content = file.read_bytes()
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"udf_file: {file} is not UTF-8 text") from None
    return content


def attach_udf(text: str, spec_path: Path) -> str:
    """Return spec ``text`` (read from ``spec_path``) carrying its ``udf_file``: when the spec names a relative
    ``udf_file``, its content from beside the spec file, in ``udf_file_base64`` (added, or replacing the one the
    text carries). A spec that names none, or an absolute one (a file on the controller's host), is returned
    as it is; so is one whose carried file is not beside it (a spec read back from the registry).

    The text is kept as written (comments too) and the field appended; a text that cannot be kept so is
    written again from its data. Raises SpecError naming udf_file (missing, too large, not UTF-8) and
    what :func:`job.control.specs.raw_spec` raises.
    """

    data = raw_spec(text, str(spec_path))
    udf_file = data.get("udf_file")
    if not isinstance(udf_file, str) or not udf_file or Path(udf_file).is_absolute() or "${" in udf_file:
        return text
    if CARRIED in data and not (spec_path.parent / udf_file).is_file():
        return text  # it carries its file already, and no newer one is beside it
    if problem := carried_name_problem(udf_file):
        raise SpecError(problem)
    value = encode_carried(read_udf_beside(spec_path, udf_file))
    if CARRIED not in data:
        block = f"{CARRIED}: |\n" + "".join(f"  {line}\n" for line in value.splitlines())
        appended = text + ("" if text.endswith("\n") or not text else "\n") + block
        if _carries(appended, data, value):
            return appended
    return dump({**{k: v for k, v in data.items() if k != CARRIED}, CARRIED: value})


def _carries(text: str, data: dict[str, Any], value: str) -> bool:
    """Whether ``text`` reads as ``data`` with ``udf_file_base64`` set to ``value`` (a text whose top level is
    not a block mapping, e.g. ``{...}``, does not take an appended field)."""

    try:
        again = raw_spec(text)
    except SpecError:
        return False
    return again == {**data, CARRIED: value}


def write_carried_udf(data: dict[str, Any], folder: Path) -> Path | None:
    """Write the file a spec's ``data`` carries into ``folder`` (made, mode 0700) under its ``udf_file`` name,
    point ``udf_file`` at it and drop ``udf_file_base64``; return its path (None when the spec carries none).

    Raises SpecError when the carried file or its name is not one a spec may carry (checked again here: the
    registry's text came from a client)."""
    value = data.pop(CARRIED, None)
    if value is None:
        return None
    name = data.get("udf_file")
    problem = carried_name_problem(name if isinstance(name, str) else None)
    if problem is not None or not isinstance(name, str):
        raise SpecError(f"{CARRIED}: {problem}")
    try:
        content = decode_carried(str(value))
    except ValueError as exc:
        raise SpecError(f"{CARRIED}: {exc}") from None
    target = folder / name
    if not target.resolve().is_relative_to(folder.resolve()):
        raise SpecError(f"udf_file {name!r} is outside the dagger's folder")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.write_bytes(content)
    target.chmod(0o600)
    data["udf_file"] = str(target)
    return target


def with_local_udf(spec: DaggerSpec) -> DaggerSpec:
    """Return ``spec`` to run in this process (a preview on the user's own plane): the file it carries written
    to a private temporary folder (removed when the process exits) and named there; ``spec`` itself when it
    carries none. Raises SpecError as :func:`write_carried_udf`."""
    import atexit
    import shutil
    import tempfile

    if not spec.udf_file_base64:
        return spec
    folder = Path(tempfile.mkdtemp(prefix="daggers-udf-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    data: dict[str, Any] = {"udf_file": spec.udf_file, CARRIED: spec.udf_file_base64}
    path = write_carried_udf(data, folder)
    return spec.model_copy(update={"udf_file": str(path), "udf_file_base64": None})


def run_text(text: str, checkpoint: Path, udf_folder: Path | None = None) -> str:
    """Return the spec text a controller runs: ``text`` with ``checkpoint_dir`` set to ``checkpoint``
    (``${VAR}`` references stay for the dagger process to resolve), and the ``udf_file`` it carries
    (``udf_file_base64``) written into ``udf_folder`` and named by its path there
    (:func:`write_carried_udf`; raises SpecError for one a spec may not carry)."""
    data = raw_spec(text)
    data["checkpoint_dir"] = str(checkpoint)
    if udf_folder is not None:
        write_carried_udf(data, udf_folder)
    return dump(data)
