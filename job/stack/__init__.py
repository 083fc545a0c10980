"""The local stack: real services (Kafka-protocol broker, InfluxDB, VictoriaMetrics, PostgreSQL) on 127.0.0.1.

``LocalStack`` is what ``daggers up`` / ``down`` / ``status`` manage; the service classes are also used
by the test fixtures in ``tests/services.py`` on ports chosen by the OS.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from job.stack.broker import (
        BROKER_KINDS,
        Broker,
        BrokerKind,
        NoidaBroker,
        TansuBroker,
        create_topic,
        kafka_ready,
        make_broker,
    )
    from job.stack.errors import StackError
    from job.stack.influx import InfluxServer, create_database, influx_ping, influx_query
    from job.stack.local import LocalStack, ServiceStatus, StackStatus, default_state_dir
    from job.stack.ports import free_port, free_ports, port_in_use
    from job.stack.postgres import PostgresServer
    from job.stack.process import ManagedProcess
    from job.stack.victoria import VictoriaServer

#: Where each name lives. They load when first used: importing one service module (``job.stack.ports``
#: from the CLI) then does not import them all (``requests`` alone is 70 ms of every ``daggers`` command).
_HOME = {
    "BROKER_KINDS": "job.stack.broker",
    "Broker": "job.stack.broker",
    "BrokerKind": "job.stack.broker",
    "InfluxServer": "job.stack.influx",
    "LocalStack": "job.stack.local",
    "ManagedProcess": "job.stack.process",
    "NoidaBroker": "job.stack.broker",
    "PostgresServer": "job.stack.postgres",
    "ServiceStatus": "job.stack.local",
    "StackError": "job.stack.errors",
    "StackStatus": "job.stack.local",
    "TansuBroker": "job.stack.broker",
    "VictoriaServer": "job.stack.victoria",
    "create_database": "job.stack.influx",
    "create_topic": "job.stack.broker",
    "default_state_dir": "job.stack.local",
    "free_port": "job.stack.ports",
    "free_ports": "job.stack.ports",
    "influx_ping": "job.stack.influx",
    "influx_query": "job.stack.influx",
    "kafka_ready": "job.stack.broker",
    "make_broker": "job.stack.broker",
    "port_in_use": "job.stack.ports",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BROKER_KINDS",
    "Broker",
    "BrokerKind",
    "InfluxServer",
    "LocalStack",
    "ManagedProcess",
    "NoidaBroker",
    "PostgresServer",
    "ServiceStatus",
    "StackError",
    "StackStatus",
    "TansuBroker",
    "VictoriaServer",
    "create_database",
    "create_topic",
    "default_state_dir",
    "free_port",
    "free_ports",
    "influx_ping",
    "influx_query",
    "kafka_ready",
    "make_broker",
    "port_in_use",
]
