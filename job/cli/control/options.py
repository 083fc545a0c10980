"""The options the control-plane commands share (as whom, through which server or registry)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

if TYPE_CHECKING:
    from job.control.protocol import Plane

UserOpt = Annotated[
    str | None,
    typer.Option(
        "--user",
        "-u",
        envvar="DAGGERS_USER",
        help="Without a server: act as this user ($DAGGERS_USER; default: "
        "the OS user). Refused with a server.",
    ),
]
ServerOpt = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar="DAGGERS_SERVER",
        help="Go through this daggers server ($DAGGERS_SERVER; default: "
        "the one of `daggers login`, else the local registry).",
    ),
]
RegistryOpt = Annotated[
    str | None,
    typer.Option(
        "--registry",
        envvar="DAGGERS_REGISTRY",
        help="Registry URL: sqlite:///path or postgresql://... (default: sqlite:///<state dir>/registry.db).",
    ),
]
StateOpt = Annotated[
    Path | None, typer.Option("--state-dir", help="State folder ($DAGGERS_HOME or ./.daggers).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
RefArg = Annotated[
    str, typer.Argument(help="The dagger: team/name, or name when it is unique in your teams.")
]
FreshOpt = Annotated[
    bool,
    typer.Option(
        "--fresh-start",
        help="Allow a change that cannot resume from the checkpoint (new checkpoint, empty state).",
    ),
]

#: The options a :class:`PlaneOptions` is made of, in the order a command's help lists them.
PLANE_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("user", UserOpt),
    ("server", ServerOpt),
    ("registry", RegistryOpt),
    ("state_dir", StateOpt),
)

F = TypeVar("F", bound=Callable[..., Any])


def registry_url(registry: str | None, state_dir: Path | None) -> str:
    """Return ``registry`` or the default registry of ``state_dir``."""
    from job.control.registry import default_registry_url

    return registry or default_registry_url(state_dir)


def open_plane(
    user: str | None, registry: str | None, state_dir: Path | None = None, server: str | None = None
) -> Plane:
    """Return the server's control plane (as the signed-in user) or, without a server, the embedded one on
    the local registry as ``user`` or the OS user (see :func:`job.control.client.open_plane`)."""
    from job.control.client import open_plane as open_client_plane
    from job.control.client import server_of

    if server_of(server) is not None:
        return open_client_plane(user, "", server)
    return open_client_plane(user, registry_url(registry, state_dir), None)


@dataclass(frozen=True)
class PlaneOptions:
    """Where a command acts and as whom: its ``--user``, ``--server``, ``--registry`` and ``--state-dir``."""

    user: str | None = None
    server: str | None = None
    registry: str | None = None
    state_dir: Path | None = None

    def plane(self) -> Plane:
        """Return the control plane these options name (:func:`open_plane`)."""
        return open_plane(self.user, self.registry, self.state_dir, self.server)

    def registry_url(self) -> str:
        """Return the registry URL these options name (:func:`registry_url`)."""
        return registry_url(self.registry, self.state_dir)


def plane_options(command: F) -> F:
    """Give ``command`` the four :data:`PLANE_OPTIONS` in place of its keyword-only ``opts: PlaneOptions``
    parameter (so its help lists them there), and call it with them as one :class:`PlaneOptions`."""
    signature = inspect.signature(command, eval_str=True)
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        if param.name == "opts":
            params += [
                inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
                for name, annotation in PLANE_OPTIONS
            ]
        else:
            params.append(param)
    if len(params) != len(signature.parameters) + len(PLANE_OPTIONS) - 1:
        raise TypeError(f"{command.__name__} has no opts: PlaneOptions parameter")

    @functools.wraps(command)
    def with_options(*args: Any, **kwargs: Any) -> Any:
        opts = PlaneOptions(**{name: kwargs.pop(name, None) for name, _ in PLANE_OPTIONS})
        return command(*args, opts=opts, **kwargs)

    # typer reads the command's parameters from __signature__ (a function's attribute typeshed leaves out)
    with_options.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    with_options.__annotations__ = {p.name: p.annotation for p in params}
    with_options.__annotations__["return"] = signature.return_annotation
    return with_options  # type: ignore[return-value]  # the command as typer sees it: its options added
