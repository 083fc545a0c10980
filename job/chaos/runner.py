"""Run a chaos experiment: start services, produce load, inject faults, watch the dagger, check outputs.

The dagger runs as its own process (``python -m job.cli run``), exactly as in production; with any
``cluster`` case it runs under the control plane instead, on two clusters with a controller each (see
:mod:`job.chaos.world`), and the controllers, not the run, restart and move it. The ground truth is
the dagger's own SQL evaluated as a Spark batch over the events the tool generated, so it does not
depend on Kafka or on the streaming engine.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import requests
import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from job.chaos.dagger import DaggerHandle, ProcessDagger
from job.chaos.experiment import Case, Experiment
from job.chaos.faults import throttle
from job.chaos.report import write_report
from job.chaos.results import CaseResult, Report, Sample, WindowCheck
from job.common.words import counted
from job.errors import SpecError
from job.produce.generator import EventBatch, generate
from job.spec import load_spec
from job.stack.broker import NoidaBroker, create_topic
from job.stack.influx import InfluxServer, create_database
from job.stack.ports import free_ports

if TYPE_CHECKING:
    from job.chaos.world import ControlPlaneWorld

STREAM_CLASSES = {
    "driver_location": "daggers.events.DriverLocationPing",
    "booking": "daggers.events.BookingLog",
    "api_log": "daggers.events.ApiLog",
}
DATABASE = "chaos"


@dataclass
class _Span:
    """A fault as it happened: when, and (under the control plane) the dagger's cluster and pid then."""

    case: Case
    started: float
    ended: float
    cluster: str | None = None
    pid: int | None = None


class ChaosRun:
    """One run of an experiment, with everything it started under ``out_dir``."""

    def __init__(self, exp: Experiment, out_dir: Path, *, log: Any = print) -> None:
        self.exp, self.out = exp, out_dir
        self.say = log
        self.out.mkdir(parents=True, exist_ok=True)
        bport, iport, ibackup = free_ports(3)
        self.broker = NoidaBroker(self.out / "broker", bport)
        self.influx = InfluxServer(self.out / "influxdb", iport, ibackup)
        self.batches: list[EventBatch] = []
        self.acked = 0
        self.generated = 0
        self.in_topic = 0
        self.samples: list[Sample] = []
        self.case_spans: list[_Span] = []
        self._stop = threading.Event()
        self._t0 = 0.0
        self._wall0 = 0.0
        self.world: ControlPlaneWorld | None = None  # with cluster cases: the registry, controllers, dagger

    # ---- set-up -------------------------------------------------------------------------------

    def _dagger_data(self) -> dict[str, Any]:
        """The dagger spec the run deploys: the experiment's dagger on the load topic (addresses not set)."""
        env = {"DAGGERS_BOOTSTRAP": self.broker.bootstrap, "DAGGERS_INFLUX": self.influx.url}
        os.environ.update(env)
        base = load_spec(self.exp.dagger)
        want = STREAM_CLASSES[self.exp.load.stream]
        if base.streams[0].proto_class != want:
            raise SpecError(
                f"the load stream {self.exp.load.stream} produces {want}, but {self.exp.dagger} "
                f"reads {base.streams[0].proto_class}"
            )
        data: dict[str, Any] = yaml.safe_load(Path(self.exp.dagger).read_text())
        data["name"] = f"chaos-{base.name}"[:63]
        stream = data["streams"][0]
        stream.update(
            topics=[self.exp.load.topic],
            start_from="earliest",
            max_records_per_batch=int(self.exp.load.events_per_s * 10),
        )
        data["watermark_delay_ms"] = self.exp.watermark_delay_ms
        data["trigger_interval_s"] = 2
        data.pop("checkpoint_dir", None)
        sink = data.pop("sink", None) or data["sinks"][0]
        measurement = sink["measurement"]
        data["sinks"] = [
            {"type": "influx", "url": "", "api": "v1", "database": DATABASE, "measurement": measurement}
        ]
        self.measurement = measurement
        self.sql = data["sql"]
        return data

    def _dagger_spec(self) -> Path:
        """Write the bare dagger's spec file (the run's broker and InfluxDB, a checkpoint under the output)."""
        data = self._dagger_data()
        data["streams"][0]["bootstrap_servers"] = self.broker.bootstrap
        data["sinks"][0]["url"] = self.influx.url
        data["checkpoint_dir"] = str(self.out / "checkpoint")
        path = self.out / "dagger.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def _control_spec(self) -> str:
        """Return the spec text the control plane deploys: the clusters' ``${DAGGERS_BOOTSTRAP}`` and
        ``${DAGGERS_INFLUX}``, no ``checkpoint_dir`` (the controller picks it)."""
        from job.control.specs import ENV_BOOTSTRAP, ENV_INFLUX, dump

        data = self._dagger_data()
        data["streams"][0]["bootstrap_servers"] = f"${{{ENV_BOOTSTRAP}}}"
        data["sinks"][0]["url"] = f"${{{ENV_INFLUX}}}"
        text = dump(data)
        (self.out / "dagger.yaml").write_text(text)
        return text

    # ---- threads ------------------------------------------------------------------------------

    def _load(self) -> None:
        load = self.exp.load
        conf = {
            "bootstrap.servers": self.broker.bootstrap,
            "linger.ms": 20,
            "acks": "all",
            "message.timeout.ms": 900_000,
            "log_level": 2,
            "queue.buffering.max.messages": 2_000_000,
        }
        # Not idempotent: a broker that loses producer state on restart (noida-db) fails an idempotent
        # producer fatally. Retries may then repeat a record; the ground truth is taken from the topic.
        producer = Producer(conf)

        def acked(err: Any, msg: Any) -> None:
            if err is None:
                self.acked += 1

        second = 0
        while not self._stop.is_set() and second < load.duration_s:
            due = self._t0 + second
            if time.monotonic() < due:
                time.sleep(due - time.monotonic())
            now = datetime.now(UTC)
            batch = generate(
                load.stream,
                int(load.events_per_s),
                seed=load.seed + second,
                start=now,
                duration_s=1.0,
                first_index=second * int(load.events_per_s),
            )
            for key, value in zip(batch.keys, batch.payloads, strict=True):
                while True:
                    try:
                        producer.produce(load.topic, value, key=key, on_delivery=acked)
                        break
                    except BufferError:
                        producer.poll(0.5)
                    except KafkaException as exc:
                        self.say(f"load producer failed ({exc.args[0].str()}); starting a new one")
                        producer = Producer(conf)
            producer.poll(0)
            self.batches.append(batch)
            self.generated += len(batch.payloads)
            second += 1
        closing = generate(
            load.stream,
            1,
            seed=load.seed + 10_000,
            start=datetime.now(UTC) + timedelta(minutes=30),
            duration_s=1.0,
        )
        for key, value in zip(closing.keys, closing.payloads, strict=True):
            producer.produce(load.topic, value, key=key, on_delivery=acked)
        self.closing = closing
        while producer.flush(5) and not self._stop.is_set():
            pass

    def _sample(self, dagger: DaggerHandle) -> None:
        while not self._stop.is_set():
            obs = dagger.observe()
            st = obs.progress
            read = int(st.get("input_rows", 0))
            self.samples.append(
                Sample(
                    t=round(time.monotonic() - self._t0, 1),
                    produced=self.acked,
                    read=read,
                    lag=max(self.acked - read, 0),
                    input_rows_per_s=float(st.get("processed_rows_per_s", 0.0)),
                    dagger_alive=obs.alive,
                    watermark=st.get("watermark"),
                    load_1m=os.getloadavg()[0],
                    cluster=obs.cluster,
                    pid=obs.pid,
                    state=obs.state,
                )
            )
            time.sleep(1.0)

    def _inject(self, case: Case, dagger: DaggerHandle, world: ControlPlaneWorld | None) -> None:
        delay = self._t0 + case.at_s - time.monotonic()
        if delay > 0 and self._stop.wait(delay):
            return
        if case.after_read and not self._wait_for_read(case):
            return
        started = time.monotonic() - self._t0
        self.say(
            f"[{started:6.1f}s] fault: {case.name} ({case.fault} {case.target} for {case.downtime_s:.0f} s)"
        )
        server = self.broker if case.target == "broker" else self.influx
        cluster = pid = None
        if dagger.supervised and case.target != "cluster":  # where it ran, to see where it runs next
            obs = dagger.observe()
            cluster, pid = obs.cluster, obs.pid
        if case.target == "cluster":
            assert world is not None
            cluster, pid = world.hit(case, self._stop)
        elif case.fault == "slow":
            group = dagger.pid() if case.target == "dagger" else server.process.pid
            if group is not None:  # each leads a process group of its own
                throttle(group, case.downtime_s, case.slow_fraction, self._stop)
        elif case.target == "dagger":
            if case.fault == "pause":
                dagger.send(signal.SIGSTOP)
                time.sleep(case.downtime_s)
                dagger.send(signal.SIGCONT)
            else:
                dagger.stop(signal.SIGKILL if case.fault == "kill" else signal.SIGTERM)
                time.sleep(case.downtime_s)
                dagger.start()
        else:
            leader = server.process.pid
            assert leader is not None, f"the {case.target} is not running"
            if case.fault == "pause":
                os.killpg(leader, signal.SIGSTOP)
                time.sleep(case.downtime_s)
                os.killpg(leader, signal.SIGCONT)
            else:
                if case.fault == "kill":
                    os.killpg(leader, signal.SIGKILL)
                server.stop()
                time.sleep(case.downtime_s)
                server.start()
        ended = time.monotonic() - self._t0
        self.case_spans.append(_Span(case, started, ended, cluster, pid))
        where = f" (it hit {cluster})" if cluster and case.target == "cluster" else ""
        self.say(f"[{ended:6.1f}s] recovered target: {case.name}{where}")

    def _wait_for_read(self, case: Case) -> bool:
        """Wait until the dagger has read ``case.after_read`` events, or the load has ended and
        recover_timeout_s passed (then say so). Return False when the run is stopping."""
        deadline = self._t0 + self.exp.load.duration_s + self.exp.recover_timeout_s
        while True:
            read = self.samples[-1].read if self.samples else 0
            if read >= case.after_read:
                return True
            if time.monotonic() >= deadline:
                self.say(
                    f"fault {case.name}: the dagger had read {read:,} of the {case.after_read:,} events it "
                    "waits for; it starts anyway"
                )
                return True
            if self._stop.wait(0.5):
                return False

    # ---- checks -------------------------------------------------------------------------------

    def expected_points(self) -> dict[tuple[Any, ...], dict[str, Any]]:
        """The dagger's SQL as a Spark batch over the generated events: (time s, tags…) -> fields."""
        from pyspark.sql import functions as F

        from job.functions.spark_udfs import register_functions
        from job.spark.session import borrowed_session
        from job.sql import translate
        from job.sql.rewrite import BARRIER_COLUMN

        table = self.topic_table()
        with borrowed_session("chaos-ground-truth", shuffle_partitions=2) as spark:
            register_functions(spark)
            translation = translate(self.sql, {"data_stream": set(table.column_names)})
            df = spark.createDataFrame(table.to_pandas())
            # Columns the job's source computes (S2Id pushed down): here with the Spark function instead.
            for col in translation.derived.get("data_stream", []):
                df = df.withColumn(col.name, F.expr(col.spark_expr()))
            (
                df.withColumn("rowtime", F.col("event_timestamp"))
                .withColumn(BARRIER_COLUMN, F.lit(0.0))
                .createOrReplaceTempView("data_stream")
            )
            sql = translation.spark_sql
            rows = spark.sql(sql).drop(BARRIER_COLUMN).toArrow().to_pylist()
        out: dict[tuple[Any, ...], dict[str, Any]] = {}
        for r in rows:
            tags = tuple(
                sorted(
                    (k.removeprefix("label_") if k.startswith("label_") else k, str(v))
                    for k, v in r.items()
                    if k.startswith(("tag_", "label_")) and v not in (None, "")
                )
            )
            fields = {
                k: v
                for k, v in r.items()
                if k != "window_timestamp" and not k.startswith(("tag_", "label_")) and v is not None
            }
            out[(int(r["window_timestamp"].timestamp()), tags)] = fields
        # The closing event's own window never closes (nothing comes after it): it is not expected.
        cutoff = int(self.closing.table.column("event_timestamp")[0].as_py().timestamp())
        return {k: v for k, v in out.items() if k[0] <= cutoff}

    def topic_table(self) -> pa.Table:
        """Every record in the load topic, decoded (all fields). Sets ``in_topic``."""
        from job.schema import default_registry
        from job.schema.arrow import ArrowDecoder

        message = STREAM_CLASSES[self.exp.load.stream]
        registry = default_registry()
        decoder = ArrowDecoder(registry, message, list(registry.fields(message)))
        consumer = Consumer(
            {
                "bootstrap.servers": self.broker.bootstrap,
                "group.id": "chaos-truth",
                "enable.partition.eof": True,
                "enable.auto.commit": False,
                "log_level": 2,
            }
        )
        parts = consumer.list_topics(self.exp.load.topic, timeout=30).topics[self.exp.load.topic].partitions
        consumer.assign([TopicPartition(self.exp.load.topic, p, 0) for p in parts])
        payloads: list[bytes | None] = []
        done: set[int] = set()
        while len(done) < len(parts):
            for msg in consumer.consume(10_000, 2.0):
                err = msg.error()
                if err is None:
                    payloads.append(msg.value())
                elif err.code() == KafkaError._PARTITION_EOF:
                    done.add(cast(int, msg.partition()))  # an end event names its partition
        consumer.close()
        batch, _ = decoder.decode(payloads)
        self.in_topic = batch.num_rows
        return pa.Table.from_batches([batch])

    def written_points(self) -> dict[tuple[Any, ...], dict[str, Any]]:
        resp = requests.get(
            f"{self.influx.url}/query",
            params={"db": DATABASE, "epoch": "s", "q": f'SELECT * FROM "{self.measurement}"'},
            timeout=30,
        )
        resp.raise_for_status()
        tag_keys = self._tag_keys()
        out: dict[tuple[Any, ...], dict[str, Any]] = {}
        for result in resp.json().get("results", []):
            for series in result.get("series") or []:
                for values in series["values"]:
                    row = dict(zip(series["columns"], values, strict=True))
                    tags = tuple(sorted((k, str(row[k])) for k in tag_keys if row.get(k) is not None))
                    out[(row["time"], tags)] = {
                        k: v for k, v in row.items() if k != "time" and k not in tag_keys and v is not None
                    }
        return out

    def _tag_keys(self) -> set[str]:
        resp = requests.get(
            f"{self.influx.url}/query",
            params={"db": DATABASE, "q": f'SHOW TAG KEYS FROM "{self.measurement}"'},
            timeout=30,
        )
        series = (resp.json().get("results") or [{}])[0].get("series") or [{}]
        return {v[0] for v in series[0].get("values") or []}

    # ---- run ----------------------------------------------------------------------------------

    def run(self) -> Report:
        """Run the experiment; return its report (also written under the output folder)."""
        exp = self.exp
        started_at = datetime.now(UTC)
        self.broker.start()
        self.influx.start()
        dagger: DaggerHandle | None = None
        world: ControlPlaneWorld | None = None
        threads: list[threading.Thread] = []
        moves: list[dict[str, Any]] = []
        try:
            create_topic(self.broker.bootstrap, exp.load.topic, exp.load.partitions, kind="noida")
            create_database(self.influx.url, DATABASE)
            if exp.controlled:
                from job.chaos.world import ControlPlaneWorld

                world = ControlPlaneWorld(
                    self.out,
                    kafka=self.broker.bootstrap,
                    influx=self.influx.url,
                    failover_after_s=exp.failover_after_s,
                )
                self.world = world
                dagger = world.start(self._control_spec())
                self.say(
                    f"dagger {world.dagger.ref if world.dagger else ''} deployed on {world.clusters[0]} "
                    f"(control plane: {', '.join(world.clusters)})"
                )
            else:
                dagger = ProcessDagger(
                    self._dagger_spec(), self.out, self.out / "checkpoint", self.out / "dagger.log"
                )
                dagger.start()
            self._t0, self._wall0 = time.monotonic(), time.time()
            threads = [
                threading.Thread(target=self._load, daemon=True),
                threading.Thread(target=self._sample, args=(dagger,), daemon=True),
            ]
            threads += [
                threading.Thread(target=self._inject, args=(c, dagger, world), daemon=True) for c in exp.cases
            ]
            for t in threads:
                t.start()
            for t in threads[2:] + threads[:1]:
                t.join()
            self.say(
                f"load done: {counted(self.generated, 'event', fmt=',')} generated, {self.acked:,} acknowledged"
            )
            want = self.expected_points()
            deadline = time.monotonic() + exp.recover_timeout_s
            got = self.written_points()
            while got != want and time.monotonic() < deadline:
                if not dagger.supervised and not dagger.alive():
                    dagger.start()  # what a controller does after a crash
                time.sleep(3)
                got = self.written_points()
            # The last batch's points are written before its progress is saved: let the samples see every
            # record read before the report takes the count from them.
            settle = time.monotonic() + 30
            while (
                got == want
                and self.samples
                and self.samples[-1].read < self.in_topic
                and time.monotonic() < settle
            ):
                time.sleep(1)
            if world is not None:
                moves = world.moves()
        finally:
            self._stop.set()
            if world is not None:
                world.close()
            elif dagger is not None:
                dagger.stop()
            self.influx.stop()
            self.broker.stop()
        report = self._report(exp, started_at, want, got, dagger, moves)
        write_report(report, self.out)
        return report

    def _case_result(self, span: _Span) -> CaseResult:
        """The outcome of one fault, from the samples: when the dagger caught up (lag back to about four
        seconds of load) and, for a cluster case, where and when it ran again."""
        exp, case, s, e = self.exp, span.case, span.started, span.ended
        caught = next(
            (x.t for x in self.samples if x.t >= e and x.lag <= max(exp.load.events_per_s * 4, 100)), None
        )
        result = CaseResult(
            case.name,
            case.target,
            case.fault,
            round(s, 1),
            round(e, 1),
            round(caught - e, 1) if caught is not None else None,
            cluster=span.cluster,
        )
        if span.cluster is not None:
            # a new process (right after a move the old one is still recorded), before the next fault
            until = min((o.started for o in self.case_spans if o.started > s), default=float("inf"))
            again = next(
                (
                    x
                    for x in self.samples
                    if s <= x.t < until and x.state == "running" and x.pid is not None and x.pid != span.pid
                ),
                None,
            )
            if again is not None:
                result.running_again_s = round(again.t - s, 1)
                result.moved_to = again.cluster if again.cluster != span.cluster else None
        return result

    def _report(
        self,
        exp: Experiment,
        started_at: datetime,
        want: dict[tuple[Any, ...], dict[str, Any]],
        got: dict[tuple[Any, ...], dict[str, Any]],
        dagger: DaggerHandle | None,
        moves: list[dict[str, Any]],
    ) -> Report:
        windows: dict[int, list[int]] = {}
        for key, fields in want.items():
            counts = windows.setdefault(key[0], [0, 0, 0])
            counts[0] += 1
            counts[2] += int(got.get(key) == fields)
        for key in got:
            windows.setdefault(key[0], [0, 0, 0])[1] += 1
        for move in moves:  # seconds since the load started, as everything else in the report
            move["t"] = round(float(move["at"]) - self._wall0, 1)
        return Report(
            experiment=exp.name,
            description=exp.description,
            started_at=started_at.isoformat(),
            duration_s=round(time.monotonic() - self._t0, 1),
            events_generated=self.generated,
            events_acknowledged=self.acked,
            events_in_topic=self.in_topic,
            rows_read=self.samples[-1].read if self.samples else 0,
            dagger_restarts=max(dagger.starts - 1, 0) if dagger else 0,
            cases=[self._case_result(span) for span in self.case_spans],
            windows=[
                WindowCheck(datetime.fromtimestamp(w, UTC).strftime("%H:%M:%S"), *c)
                for w, c in sorted(windows.items())
            ],
            exact=got == want,
            samples=self.samples,
            mode="control-plane" if exp.controlled else "process",
            moves=moves,
        )
