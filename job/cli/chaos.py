"""``daggers chaos``: run, list and create load & chaos experiments."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from job.cli.common import SafeConsole, err, fail, print_table
from job.errors import DaggerError

DEFAULT_DIR = Path("examples/chaos")


def register(app: typer.Typer) -> None:
    """Add the ``chaos`` command group to ``app``."""
    chaos = typer.Typer(
        help="Load & chaos experiments: produce load, inject faults, check the outputs.", no_args_is_help=True
    )
    app.add_typer(chaos, name="chaos")
    out = SafeConsole(soft_wrap=True)

    @chaos.command("run")
    def run(
        file: Path, out_dir: Annotated[Path | None, typer.Option("--out", help="Report folder.")] = None
    ) -> None:
        """Run an experiment and write its report (Markdown, JSON, PNG plots)."""
        from job.chaos.experiment import load_experiment
        from job.chaos.runner import ChaosRun

        try:
            exp = load_experiment(file)
            folder = out_dir or Path(".daggers") / "chaos" / exp.name
            report = ChaosRun(exp, folder, log=out.print).run()
        except DaggerError as exc:
            fail(exc)
            return
        verdict = "[green]outputs equal the ground truth[/]" if report.exact else "[red]outputs DIFFER[/]"
        out.print(f"{verdict}; report: {folder / 'report.md'}")
        if not report.exact:
            raise typer.Exit(1)

    @chaos.command("list")
    def list_(folder: Annotated[Path, typer.Argument(help="Where experiments live.")] = DEFAULT_DIR) -> None:
        """List the experiments in a folder."""
        from job.chaos.experiment import load_experiment

        table = Table("file", "name", "cases", "load")
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml"), *folder.glob("*.json")]):
            try:
                exp = load_experiment(path)
            except DaggerError as exc:
                table.add_row(str(path), f"[red]invalid[/]: {exc.message.splitlines()[0]}", "", "")
                continue
            table.add_row(
                str(path),
                exp.name,
                ", ".join(c.name for c in exp.cases),
                f"{exp.load.events_per_s:g}/s for {exp.load.duration_s:g} s",
            )
        print_table(out, table, markup=True)

    @chaos.command("new")
    def new(
        name: str, folder: Annotated[Path, typer.Option(help="Where to write it.")] = DEFAULT_DIR
    ) -> None:
        """Write a new experiment file from a template."""
        from job.chaos.experiment import TEMPLATE

        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.yaml"
        if path.exists():
            err.print(f"[red]{path} exists[/]")
            raise typer.Exit(2)
        path.write_text(TEMPLATE.format(name=name))
        out.print(f"wrote {path}")
