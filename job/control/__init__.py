"""The control plane: a registry of clusters, teams, users and daggers, the operations on them (as a
user, authorised and audited), cluster health, and the controller that makes each cluster run what
the registry says.

No UI toolkit is imported here: the ``daggers`` subcommands and the console are thin clients of
:class:`ControlPlane`, or, through ``daggers server`` (:mod:`job.server`), of
:class:`job.control.remote.RemoteControlPlane`, which has the same methods (:func:`job.control.client.open_plane`
picks one). Controllers use a :class:`job.control.agent.ClusterAgent` scoped to their cluster, embedded or
through the server.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from job.control.admin import bootstrap_admin
    from job.control.api import ControlPlane
    from job.control.errors import (
        ConflictError,
        ControlError,
        NotFoundError,
        PermissionDeniedError,
        RegistryError,
    )
    from job.control.registry import Registry, default_registry_url
    from job.control.views import (
        AuditView,
        ClusterView,
        Compatibility,
        DaggerView,
        EditResult,
        SampleView,
        Validation,
        VersionView,
    )

#: Where each exported name is defined: imported on first use, so that importing one module of the package
#: (e.g. :mod:`job.control.health_model` for a command's output) does not load the registry and SQLAlchemy.
_WHERE = {
    "AuditView": "job.control.views",
    "ClusterView": "job.control.views",
    "Compatibility": "job.control.views",
    "ConflictError": "job.control.errors",
    "ControlError": "job.control.errors",
    "ControlPlane": "job.control.api",
    "DaggerView": "job.control.views",
    "EditResult": "job.control.views",
    "NotFoundError": "job.control.errors",
    "PermissionDeniedError": "job.control.errors",
    "Registry": "job.control.registry",
    "RegistryError": "job.control.errors",
    "SampleView": "job.control.views",
    "Validation": "job.control.views",
    "VersionView": "job.control.views",
    "bootstrap_admin": "job.control.admin",
    "default_registry_url": "job.control.registry",
}


def __getattr__(name: str) -> Any:
    """Return the exported ``name``, importing the module that defines it (PEP 562).

    Raises AttributeError for a name the package does not export."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


__all__ = [
    "AuditView",
    "ClusterView",
    "Compatibility",
    "ConflictError",
    "ControlError",
    "ControlPlane",
    "DaggerView",
    "EditResult",
    "NotFoundError",
    "PermissionDeniedError",
    "Registry",
    "RegistryError",
    "SampleView",
    "Validation",
    "VersionView",
    "bootstrap_admin",
    "default_registry_url",
]
