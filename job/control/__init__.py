"""The control plane: a registry of clusters, teams, users and daggers, the operations on them (as a
user, authorised and audited), cluster health, and the controller that makes each cluster run what
the registry says.

No UI toolkit is imported here: the ``daggers`` subcommands and the console are thin clients of
:class:`ControlPlane`, or, through ``daggers server`` (:mod:`job.server`), of
:class:`job.control.remote.RemoteControlPlane`, which has the same methods (:func:`job.control.client.open_plane`
picks one). Controllers use a :class:`job.control.agent.ClusterAgent` scoped to their cluster, embedded or
through the server.
"""

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
