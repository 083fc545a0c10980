"""A bad number in a spec is one line naming the field's path, the value as the spec wrote it and what the
field allows, on every path a spec takes: a spec file (``daggers run``, ``daggers sql check``), the control
plane's validate (``daggers dagger validate``) and create with deploy (``daggers dagger create --deploy``),
the server's ``/validate`` and ``/daggers`` routes, and the console's form. Hypothesis writes the bad values;
a few fixed ones are checked through the real ``daggers`` script and the console."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import pytest
import requests
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from job.control import ControlPlane, Registry
from job.errors import SpecError
from job.spec import DaggerSpec, parse_spec
from job.spec.base import SpecModel
from job.spec.loading import format_validation
from job.spec.numbers import number_kind
from tests.job.control.control_seed import bookings_spec
from tests.job.server.server_world import running_server, seed_tokens
from tui.form_errors import form_problems

DAGGERS = Path(sys.executable).parent / "daggers"
CLUSTER_ENV = {"DAGGERS_BOOTSTRAP": "127.0.0.1:9", "DAGGERS_INFLUX": "http://127.0.0.1:9"}
#: The seed's spec without its two settings: a field written after it is on line 22.
BASE = (
    bookings_spec("probe").replace("watermark_delay_ms: 10000\n", "").replace("trigger_interval_s: 1\n", "")
)
LINE = len(BASE.splitlines()) + 1


@dataclass(frozen=True)
class Field:
    name: str
    allowed: str
    whole: bool
    low: int
    high: int | None
    label: str  # the console form's label


FIELDS = {
    "watermark_delay_ms": Field(
        "watermark_delay_ms", "a whole number of at least 0", True, 0, None, "Watermark delay (ms)"
    ),
    "parallelism": Field("parallelism", "a whole number from 1 to 1024", True, 1, 1024, "Parallelism"),
    "trigger_interval_s": Field("trigger_interval_s", "a number of at least 0", False, 0, None, "Trigger"),
}


def spec_with(field: str, value: str) -> str:
    return f"{BASE}{field}: {value}\n"


def shown(value: str) -> str:
    """The value as the message quotes it: a scalar as written, a flow list or mapping as JSON."""
    return json.dumps(yaml.safe_load(value)) if value[:1] in "[{" else value


def expected(field: Field, value: str, source: str = "spec") -> str:
    return f"{source}:{LINE}: {field.name}: {shown(value)} is not {field.allowed}"


def bad_values(field: Field) -> st.SearchStrategy[str]:
    """YAML texts of values ``field`` refuses: words, quoted words, booleans, null, non-finite numbers,
    lists and mappings, numbers below its range or above it, fractions for a whole number."""
    options = [
        st.from_regex(r"\A[a-z][a-z_]{0,11}\Z"),
        st.from_regex(r"\A[a-z]{1,10}\Z").map(lambda w: f'"{w}"'),
        st.sampled_from(["true", "false", "True", "yes", "no", "on", "off", "null", "~"]),
        st.sampled_from([".nan", ".inf", "-.inf", "1e400", "1.0e+400", "-1.0e+400", "nan", "NaN", "'7x'"]),
        st.sampled_from(["[1]", "[]", "{a: 1}", "{}", "[fast, 2]"]),
        st.integers(-(10**12), field.low - 1).map(str),
    ]
    if not field.whole:
        options.append(st.floats(max_value=field.low - 1e-3, min_value=-1e9).map(lambda x: f"{x:.3f}"))
    else:
        options.append(
            st.floats(min_value=0.5, max_value=1000, allow_nan=False)
            .filter(lambda x: not x.is_integer())
            .map(lambda x: f"{x:.2f}".rstrip("0") if not float(f"{x:.2f}").is_integer() else "1.5")
        )
    if field.high is not None:
        options.append(st.integers(field.high + 1, 10**12).map(str))
    return st.one_of(*options)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Registry, dict[str, str]]]:
    """A seeded SQLite registry (team-a: alice editor, vera viewer; cluster a-jkt) and each user's token."""
    url = f"sqlite:///{tmp_path_factory.mktemp('registry') / 'registry.db'}"
    reg = Registry(url)
    _, tokens = seed_tokens(reg)
    yield url, reg, tokens
    reg.close()


@pytest.fixture(scope="module")
def server(
    registry: tuple[str, Registry, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A real ``daggers server`` on the registry; its base URL."""
    with running_server(registry[0], tmp_path_factory.mktemp("server") / "server.log") as base:
        yield base


SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.parametrize("field", FIELDS.values(), ids=FIELDS)
def test_a_bad_number_is_named_on_every_path_in_process(
    field: Field, registry: tuple[str, Registry, dict[str, str]]
) -> None:
    """A spec file, the control plane's validate and create-and-deploy, and the console form's wording."""
    _, reg, _ = registry
    vera, alice = ControlPlane(reg, "vera"), ControlPlane(reg, "alice")

    @SETTINGS
    @given(value=bad_values(field))
    def check(value: str) -> None:
        text, message = spec_with(field.name, value), expected(field, value)
        with pytest.raises(SpecError) as from_file:
            parse_spec(text, "s.yaml", env=CLUSTER_ENV)
        assert from_file.value.message == expected(field, value, "s.yaml")
        v = vera.validate("a-jkt", text)
        assert (v.ok, v.title, v.message) == (False, "Invalid dagger spec", message)
        with pytest.raises(SpecError) as deploy:
            alice.create("a-jkt", text, deploy=True)
        assert deploy.value.message == message
        if field.name != "trigger_interval_s":  # the form has no field for it
            assert form_problems(message) == [f"{field.label}: {shown(value)} is not {field.allowed}"]

    check()


@pytest.mark.integration
@pytest.mark.parametrize("field", FIELDS.values(), ids=FIELDS)
def test_a_bad_number_is_named_by_the_server(
    field: Field, registry: tuple[str, Registry, dict[str, str]], server: str
) -> None:
    """The server's validate route answers the message; its create route refuses with it (422)."""
    _, _, tokens = registry

    @SETTINGS
    @given(value=bad_values(field))
    def check(value: str) -> None:
        text, message = spec_with(field.name, value), expected(field, value)
        r = requests.post(
            f"{server}/api/v1/validate",
            json={"cluster": "a-jkt", "spec": text},
            headers={"Authorization": f"Bearer {tokens['vera']}"},
            timeout=30,
        )
        assert r.status_code == 200 and r.json()["message"] == message, r.text
        r = requests.post(
            f"{server}/api/v1/daggers",
            json={"cluster": "a-jkt", "spec": text, "deploy": True},
            headers={"Authorization": f"Bearer {tokens['alice']}"},
            timeout=30,
        )
        assert r.status_code == 422, r.text
        assert r.json()["error"] == {"title": "Invalid dagger spec", "message": message, "hint": None}

    check()


def number_fields() -> list[tuple[type[SpecModel], str]]:
    """Every number field of every section of the spec."""
    seen: list[type[SpecModel]] = []

    def walk(model: type[SpecModel]) -> None:
        if model in seen:
            return
        seen.append(model)
        for f in model.model_fields.values():
            for sub in _models(f.annotation):
                walk(sub)

    walk(DaggerSpec)
    return [(m, name) for m in seen for name, f in m.model_fields.items() if number_kind(f.annotation)]


def _models(annotation: object) -> list[type[SpecModel]]:
    if isinstance(annotation, type) and issubclass(annotation, SpecModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models(arg)]


#: Values no number field takes, and how a message quotes each (as YAML spells it).
NOT_NUMBERS = [
    ("fast", '"fast"'),
    (True, "true"),
    (float("nan"), ".nan"),
    (float("inf"), ".inf"),
    ([1], "[1]"),
    (None, "null"),
    (-(10**20), "-100000000000000000000"),
]


@pytest.mark.parametrize(("model", "name"), number_fields(), ids=lambda x: getattr(x, "__name__", x))
@pytest.mark.parametrize(("value", "quoted"), NOT_NUMBERS, ids=[q for _, q in NOT_NUMBERS])
def test_every_number_field_names_the_value(
    model: type[SpecModel], name: str, value: object, quoted: str
) -> None:
    """No number field of the spec answers pydantic's wording, which names no value."""
    with pytest.raises(ValidationError) as info:
        model.model_validate({name: value})
    lines = [
        line for line in format_validation(info.value).splitlines() if line.startswith(f"spec: {name}: ")
    ]
    assert len(lines) == 1 and lines[0].startswith(f"spec: {name}: {quoted} is not a "), lines


@pytest.mark.parametrize(
    ("field", "value", "line"),
    [
        ("parallelism", "-3", "parallelism: -3 is not a whole number from 1 to 1024"),
        ("trigger_interval_s", '"fast"', 'trigger_interval_s: "fast" is not a number of at least 0'),
        ("trigger_interval_s", "1e400", "trigger_interval_s: 1e400 is not a number of at least 0"),
        ("watermark_delay_ms", "nan", "watermark_delay_ms: nan is not a whole number of at least 0"),
        ("watermark_delay_ms", "true", "watermark_delay_ms: true is not a whole number of at least 0"),
        ("parallelism", "2.5", "parallelism: 2.5 is not a whole number from 1 to 1024"),
    ],
)
def test_the_exact_line_for_a_spec_file(field: str, value: str, line: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(spec_with(field, value), "s.yaml", env=CLUSTER_ENV)
    assert info.value.message == f"s.yaml:{LINE}: {line}"


def daggers(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **env}
    for name in ("DAGGERS_DEBUG", "DAGGERS_SERVER", "DAGGERS_TOKEN"):
        full.pop(name, None)
    full.update(env)
    return subprocess.run(
        [str(DAGGERS), *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=full
    )


@pytest.mark.integration
def test_the_exact_line_through_the_daggers_script(
    registry: tuple[str, Registry, dict[str, str]], server: str, tmp_path: Path
) -> None:
    """``daggers sql check`` (a file), ``dagger validate`` and ``dagger create --deploy`` (embedded, and through
    the server), as a user's shell runs them."""
    url, _, tokens = registry
    spec = tmp_path / "s.yaml"
    embedded = {"DAGGERS_REGISTRY": url, **CLUSTER_ENV}

    spec.write_text(spec_with("watermark_delay_ms", "true"))
    r = daggers("sql", "check", str(spec), "--state-dir", str(tmp_path), env=embedded, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (
        2,
        f"Invalid dagger spec: {spec}:{LINE}: watermark_delay_ms: true is not a whole number of at least 0\n",
    )

    spec.write_text(spec_with("parallelism", "-3"))
    r = daggers(
        "dagger", "validate", str(spec), "--cluster", "a-jkt", "--user", "vera", env=embedded, cwd=tmp_path
    )
    assert (r.returncode, r.stdout) == (
        2,
        f"Invalid dagger spec: spec:{LINE}: parallelism: -3 is not a whole number from 1 to 1024\n",
    )

    spec.write_text(spec_with("trigger_interval_s", '"fast"'))
    r = daggers(
        "dagger",
        "create",
        str(spec),
        "--cluster",
        "a-jkt",
        "--deploy",
        "--user",
        "alice",
        env=embedded,
        cwd=tmp_path,
    )
    assert (r.returncode, r.stdout, r.stderr) == (
        2,
        "",
        f'Invalid dagger spec: spec:{LINE}: trigger_interval_s: "fast" is not a number of at least 0\n',
    )

    spec.write_text(spec_with("trigger_interval_s", "1e400"))
    remote = {"DAGGERS_SERVER": server, "DAGGERS_TOKEN": tokens["alice"]}
    r = daggers("dagger", "validate", str(spec), "--cluster", "a-jkt", env=remote, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (
        2,
        f"Invalid dagger spec: spec:{LINE}: trigger_interval_s: 1e400 is not a number of at least 0\n",
    )
    r = daggers("dagger", "create", str(spec), "--cluster", "a-jkt", "--deploy", env=remote, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (
        2,
        f"Invalid dagger spec: spec:{LINE}: trigger_interval_s: 1e400 is not a number of at least 0\n",
    )
