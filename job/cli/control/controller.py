"""``daggers controller``: run a cluster's controller."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer

from job.cli.control.options import RegistryOpt, ServerOpt, StateOpt, registry_url
from job.cli.control.reply import errors


def controller(
    cluster: Annotated[str, typer.Option("--cluster", help="The cluster to run daggers on.")],
    server: ServerOpt = None,
    registry: RegistryOpt = None,
    state_dir: StateOpt = None,
    poll: Annotated[float, typer.Option(help="Seconds between reconcile rounds.")] = 1.0,
    max_restarts: Annotated[int, typer.Option(help="Crashes in a row restarted.")] = 5,
    backoff: Annotated[float, typer.Option(help="First restart delay (doubles).")] = 2.0,
    max_backoff: Annotated[
        float, typer.Option(help="Longest restart delay: the doubling stops there.")
    ] = 120.0,
    stop_daggers_on_exit: Annotated[
        bool, typer.Option(help="Stop the daggers when the controller stops (default: leave them running).")
    ] = False,
    standby: Annotated[
        bool, typer.Option(help="Keep a warm dagger process for the next deploy (local masters).")
    ] = True,
    failover_after: Annotated[
        float,
        typer.Option(
            help="Take over the running daggers of a cluster that "
            "fails over to this one once its controller "
            "heartbeat is this many seconds old."
        ),
    ] = 60.0,
    metrics_port: Annotated[
        int,
        typer.Option(
            help="Serve Prometheus metrics on this port (0: one the "
            "OS picks, recorded in the registry; -1: none)."
        ),
    ] = 0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run a cluster's controller: start, watch, restart and stop its daggers as the registry says."""
    from job.control import Registry
    from job.control.controller import Controller, ControllerSettings
    from job.stack.local import default_state_dir

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    with errors(False):
        root = (state_dir or default_state_dir()) / "controller" / cluster
        settings = ControllerSettings(
            poll_interval_s=poll,
            max_restarts=max_restarts,
            backoff_initial_s=backoff,
            backoff_max_s=max_backoff,
            standby=standby,
            failover_after_s=failover_after,
            metrics_port=None if metrics_port < 0 else metrics_port,
        )
        from job.control.client import server_of

        target = server_of(server)
        if target is not None:  # through the server, with the cluster's controller token ($DAGGERS_TOKEN)
            from job.control.errors import AuthError
            from job.control.remote import RemoteClusterAgent

            url, token, ca = target
            if not token:
                raise AuthError(
                    f"no controller token for the server {url}",
                    hint=f"a team admin makes one: daggers token create --cluster {cluster}; "
                    "give it as $DAGGERS_TOKEN",
                )
            store: Any = RemoteClusterAgent(url, token, cluster, verify=ca or True)
        else:
            store = Registry(registry_url(registry, state_dir))
        ctl = Controller(store, cluster, root, settings=settings)
        ctl.run_forever(stop_daggers_on_exit=stop_daggers_on_exit)
