"""Before a dagger starts Spark: wait for its Kafka brokers (up to each stream's ``max_outage_s``) and
check that its topics exist, so that a broker that is not up yet delays the start instead of failing it.

While it waits it prints a line now and then saying what it waits for; after ``max_outage_s`` it gives
up with one SourceError naming the broker, and a missing topic fails at once with a ``daggers produce``
command that creates it. Streams with a failover cluster are left to the source, which moves to the
secondary.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence

from job.errors import SourceError
from job.sources import offsets as kofs
from job.sources.kafka import SourceConfig

#: Seconds between two "still waiting" lines.
SAY_EVERY_S = 10.0
#: Seconds one look-up may take (librdkafka keeps trying to connect within it).
PROBE_TIMEOUT_S = 5.0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def wait_for_brokers(
    sources: Sequence[SourceConfig],
    *,
    say: Callable[[str], None] = _stderr,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    probe_timeout_s: float = PROBE_TIMEOUT_S,
    interrupted: threading.Event | None = None,
) -> None:
    """Return once every source's broker answers and its topics exist.

    ``interrupted``: set by a Ctrl-C handler; checked at every round, so that a Ctrl-C is never lost (a
    KeyboardInterrupt raised while librdkafka's C code runs can be swallowed before it reaches here: the
    wait then went on for max_outage_s, seen once in CI).

    Raises:
        KeyboardInterrupt: ``interrupted`` is set.
        SourceError: a broker stayed unreachable for longer than its source's ``max_outage_s``, or a
            topic does not exist.
    """
    for cfg in sources:
        if cfg.failover:
            continue
        _wait_for(cfg, say, clock, sleep, probe_timeout_s, interrupted)


def _wait_for(
    cfg: SourceConfig,
    say: Callable[[str], None],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    probe_timeout_s: float,
    interrupted: threading.Event | None,
) -> None:
    started = clock()
    next_say = started
    waited_for_it = False
    while True:
        if interrupted is not None and interrupted.is_set():
            raise KeyboardInterrupt
        consumer = kofs.driver_consumer(cfg.bootstrap_servers, cfg.consumer_config)
        try:
            left = cfg.max_outage_s - (clock() - started)
            kofs.partitions_of(
                consumer,
                cfg.topics,
                cfg.bootstrap_servers,
                timeout=min(probe_timeout_s, max(left / 2, 0.5)),
                proto_class=cfg.proto_class,
            )
            if waited_for_it:
                say(f"daggers: the Kafka broker at {cfg.bootstrap_servers} answers now; starting")
            return
        except SourceError as exc:
            if not exc.message.startswith("cannot reach"):
                raise
            waited_for_it = True
            waited = clock() - started
            if clock() >= next_say:
                say(
                    f"daggers: waiting for the Kafka broker at {cfg.bootstrap_servers} (topics "
                    f"{', '.join(cfg.topics)}): unreachable for {waited:.0f} s, giving up after "
                    f"max_outage_s {cfg.max_outage_s:g} s"
                )
                next_say = clock() + SAY_EVERY_S
            if waited >= cfg.max_outage_s:
                raise SourceError(
                    f"cannot reach the Kafka broker at {cfg.bootstrap_servers} (waited {waited:.0f} s, "
                    f"max_outage_s {cfg.max_outage_s:g})",
                    hint="start it (`daggers up` starts the local stack), or fix the stream's "
                    "bootstrap_servers; max_outage_s sets how long a dagger waits",
                ) from None
            sleep(min(1.0, max(0.0, cfg.max_outage_s - waited)))
        finally:
            consumer.close()
