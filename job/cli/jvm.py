"""``daggers jvm-archive``: write the class archive every dagger's JVM starts from (see :mod:`job.spark.jvm_archive`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from job.cli.common import fail, out
from job.errors import DaggerError


def jvm_archive(
    path: Annotated[
        Path | None,
        typer.Option(
            "--path",
            help="Write it here (default: $DAGGERS_JVM_ARCHIVE, else ~/.cache/daggers/jvm-<key>.jsa).",
        ),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Only say whether it is there; exit 1 when not.")
    ] = False,
) -> None:
    """Write the JVM's class archive (CDS): a dagger then reaches its first point ~4 s sooner on ~6 core-s less.

    Run again after upgrading pyspark or the JDK (setup.sh runs it); a JVM ignores an archive that no
    longer matches and starts as it would without one."""
    from job.spark import jvm_archive as archive

    target = path or archive.archive_path()
    if check:
        there = target is not None and target.is_file()
        out.print(
            f"{target}: {'present' if there else 'missing'}" if target else "the archive is turned off",
            highlight=False,
        )
        raise typer.Exit(0 if there else 1)
    try:
        written, mb = archive.build(target)
    except DaggerError as exc:
        fail(exc)
        return
    out.print(f"wrote {written} ({mb:,.0f} MB): new dagger JVMs start from it", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``jvm-archive`` to ``app``."""
    app.command("jvm-archive")(jvm_archive)
