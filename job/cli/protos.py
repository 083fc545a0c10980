"""``daggers protos list|build``: the protobuf schemas in protos/."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from job.cli.common import fail, out
from job.common.words import counted
from job.errors import DaggerError

protos_app = typer.Typer(help="The protobuf schemas in protos/.", no_args_is_help=True)


@protos_app.command("list")
def protos_list() -> None:
    """List the message classes in protos/ with their fields."""
    from job.schema import default_registry

    try:
        reg = default_registry()
    except DaggerError as exc:
        fail(exc)
        return
    for name in reg.message_names():
        fields = ", ".join(
            f"{f.name}:{f.kind}{'[]' if f.repeated else ''}" for f in reg.fields(name).values()
        )
        out.print(f"[bold]{name}[/]  {fields}")


@protos_app.command("build")
def protos_build(
    out_file: Annotated[
        Path | None,
        typer.Option("--out", help="Also write the compiled schema version (a FileDescriptorSet) here."),
    ] = None,
    root: Annotated[
        Path | None,
        typer.Option(
            "--root",
            help="A team's own folder of .proto files instead of protos/ (no *_pb2.py are "
            "generated; serve the --out file for schema_url:).",
        ),
    ] = None,
) -> None:
    """Compile protos/ (a versioned descriptor set and *_pb2.py modules) with grpcio-tools."""
    from job.schema.compile import PROTO_ROOT, compile_descriptor_set, generate_python, source_hash
    from job.schema.team import CACHE_DIR

    try:
        if root is not None:
            data = compile_descriptor_set(root, CACHE_DIR)
        else:
            data = compile_descriptor_set()
            for path in generate_python():
                out.print(f"generated {path}")
    except DaggerError as exc:
        fail(exc)
        return
    out.print(f"schema version {source_hash(root or PROTO_ROOT)} ({counted(len(data), 'byte', fmt=',')})")
    if out_file is not None:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_bytes(data)
        out.print(f"wrote {out_file} (use it as schema_file: in a spec, or serve it for schema_url:)")


def register(app: typer.Typer) -> None:
    """Add the ``protos`` command group to ``app``."""
    app.add_typer(protos_app, name="protos")
