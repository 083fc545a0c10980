"""The local stack: real services (Kafka-protocol broker, InfluxDB, VictoriaMetrics, PostgreSQL) on 127.0.0.1.

``LocalStack`` is what ``daggers up`` / ``down`` / ``status`` manage; the service classes are also used
by the test fixtures in ``tests/services.py`` on ports chosen by the OS.
"""

from __future__ import annotations

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
