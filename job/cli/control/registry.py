"""``daggers registry``: the registry database."""

from __future__ import annotations

from typing import Annotated

import typer

from job.cli.control.options import JsonOpt, RegistryOpt, StateOpt, registry_url
from job.cli.control.reply import errors, ok

registry_app = typer.Typer(help="The registry database.", no_args_is_help=True)


@registry_app.command("init")
def registry_init(
    admin: Annotated[str, typer.Option("--admin", help="The first user, a superuser.")],
    registry: RegistryOpt = None,
    state_dir: StateOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create the registry's tables and its first user (a superuser)."""
    from job.control import Registry, bootstrap_admin

    with errors(as_json):
        reg = Registry(registry_url(registry, state_dir))
        bootstrap_admin(reg, admin)
        ok(
            f"registry {reg.safe_url} ready; superuser {admin}",
            {"registry": reg.safe_url, "admin": admin},
            as_json,
        )
