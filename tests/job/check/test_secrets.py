"""The clear-secret detector (job/check/secrets.py): every form a secret can take in a spec is found at its
field's path, at any depth; a ``${NAME}`` reference in the same place never is; the docs' and examples'
dagger specs give no finding."""

from __future__ import annotations

import copy
import re
import string
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from job.check.secrets import check_clear_secrets, find_clear_secrets, is_secret_key, key_words, references
from job.errors import SpecError
from tests.docs.blocks import ROOT

settings.register_profile("daggers", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("daggers")

SEED = yaml.safe_load((ROOT / "examples" / "bookings-per-s2.yaml").read_text())

#: Keys that name a secret, as users write them (sinks, lookups' headers, librdkafka and Spark settings).
SECRET_KEYS = [
    "password",
    "passwd",
    "token",
    "api_key",
    "apiKey",
    "ApiKey",
    "X-Api-Key",
    "X-API-KEY",
    "secret",
    "client_secret",
    "clientSecret",
    "Authorization",
    "Proxy-Authorization",
    "Cookie",
    "Set-Cookie",
    "sasl.password",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.key.pem",
    "ssl.keystore.key",
    "private_key",
    "privateKey",
    "PGPASSWORD",
    "auth_token",
    "X-Auth-Token",
    "access_token",
    "refresh_token",
    "credentials",
    "credential",
    "secret_key",
    "aws_secret_access_key",
    "spark.hadoop.fs.s3a.secret.key",
    "passphrase",
    "password_b64",
    "token.value",
    "basic.auth.user.info",
    "basic_auth",
    "sasl.oauthbearer.client.secret",
    "sasl.jaas.config",
    "sasl.oauthbearer.config",
]
#: Keys that look like a secret's and are not (a spec's own fields among them).
PLAIN_KEYS = [
    "key_columns",
    "token_count",
    "keys",
    "key",
    "tokenizer",
    "max_tokens",
    "password_file",
    "token_url",
    "secret_name",
    "credentials_file",
    "cookie_name",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.truststore.location",
    "sasl.mechanism",
    "sasl.username",
    "username",
    "auth_type",
    "api",
    "api_version",
    "key_field",
    "private_network",
    "consumer_config",
    "producer_config",
    "keystore",
    "passthrough",
    "bypass",
    "tokens_per_s",
    "id_pattern",
    "password_env",
    "secret_ref",
    "ca_certs",
    "ssl.certificate.location",
    "monkey",
    "turkey",
    "hotkey",
    "dsn",
    "url",
    "hosts",
    "headers",
    "bootstrap_servers",
    "index",
    "Accept",
    "Content-Type",
    "spark_conf",
    "schema_url",
]
#: Keys a secret is put under at random: none of them makes the value a secret's, nor holds SQL.
#: (Not "api" nor "keystore": ``api: {key: ...}`` is an API key.)
PATH_KEYS = [k for k in PLAIN_KEYS if k not in ("dsn", "api", "keystore")]
PATH_KEYS += ["sink", "sinks", "lookups", "streams", "options", "x"]
JAAS_KEYS = {"sasl.jaas.config", "sasl.oauthbearer.config"}
HEADERS = st.sampled_from(["Authorization", "Proxy-Authorization"])
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="{}";'

#: A secret as a user types it: at least 8 characters, one of them a letter or digit, no ``$`` (a reference).
URL_SAFE = string.ascii_letters + string.digits + "-._~!*+"
PRINTABLE = "".join(c for c in string.printable if c not in string.whitespace and c not in "$")


def secrets(alphabet: str = PRINTABLE) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=8, max_size=40).filter(lambda s: any(c.isalnum() for c in s))


def _pem(body: str, kind: str) -> str:
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----\n"


#: The forms: name -> (strategy of the secret, the value holding it, the key it goes under or None: any).
FORMS: dict[str, tuple[st.SearchStrategy[str], Any, st.SearchStrategy[str] | None]] = {
    "userinfo": (secrets(URL_SAFE), lambda s, d: f"{d['scheme']}://app:{s}@db.internal:5432/x", None),
    "userinfo quoted": (secrets(), lambda s, d: f"https://app:{quote(s, safe='')}@influx:8086", None),
    # a password with / ? or # unquoted (after a digit, "app:123/x" is a port and a path)
    "userinfo loose": (
        secrets(URL_SAFE + "/?#").filter(lambda s: not s[0].isdigit()),
        lambda s, d: f"http://app:{s}@influx:8086/",
        None,
    ),
    "bootstrap userinfo": (secrets(URL_SAFE), lambda s, d: f"kafka-1:9092,app:{s}@kafka-2:9092", None),
    "query": (
        secrets(URL_SAFE),
        lambda s, d: f"http://influx:8086/write?db=x&{d['param']}={s}&precision=s",
        None,
    ),
    "jaas": (secrets(PRINTABLE.replace('"', "")), lambda s, d: JAAS.format(s), None),
    "pem": (secrets(string.ascii_letters + string.digits + "+/="), lambda s, d: _pem(s, d["pem"]), None),
    "dsn": (
        secrets(URL_SAFE + "#%^()[]"),
        lambda s, d: f"host=db port=5432 user=app password={s} dbname=crm",
        None,
    ),
    "dsn quoted": (
        secrets(PRINTABLE.replace("'", "")),
        lambda s, d: f"host=db password='{s}' user=app",
        None,
    ),
    # (no "{": "{column}" is where an HTTP lookup puts a row's value)
    "secret key": (
        secrets(PRINTABLE.replace("{", "")),
        lambda s, d: s,
        st.sampled_from([k for k in SECRET_KEYS if k not in JAAS_KEYS]),
    ),
    "bearer": (secrets(PRINTABLE.replace("{", "")), lambda s, d: f"Bearer {s}", HEADERS),
    "default": (
        secrets(PRINTABLE.replace("}", "")),
        lambda s, d: f"${{{d['var']}:-{s}}}",
        st.sampled_from(SECRET_KEYS),
    ),
    "default in url": (
        secrets(URL_SAFE),
        lambda s, d: f"${{DAGGERS_INFLUX:-http://app:{s}@influx:8086}}",
        None,
    ),
    "default in userinfo": (
        secrets(URL_SAFE),
        lambda s, d: f"http://app:${{{d['var']}:-{s}}}@influx:8086",
        None,
    ),
}
#: The same places holding a reference: never a finding.
REFERENCES: dict[str, tuple[Any, st.SearchStrategy[str] | None]] = {
    "userinfo": (lambda r, d: f"{d['scheme']}://app:{r}@db.internal:5432/x", None),
    "userinfo all": (lambda r, d: f"{d['scheme']}://{r}@db.internal:5432/x", None),
    "bootstrap userinfo": (lambda r, d: f"kafka-1:9092,app:{r}@kafka-2:9092", None),
    "query": (lambda r, d: f"http://influx:8086/write?db=x&{d['param']}={r}&precision=s", None),
    "jaas": (lambda r, d: JAAS.format(r), st.sampled_from(sorted(JAAS_KEYS) + PATH_KEYS)),
    "dsn": (lambda r, d: f"host=db port=5432 user=app password={r} dbname=crm", None),
    "secret key": (lambda r, d: r, st.sampled_from(SECRET_KEYS)),
    "bearer": (lambda r, d: f"Bearer {r}", HEADERS),
    "cookie": (lambda r, d: f"sid={r}", st.just("Cookie")),
}

details = st.fixed_dictionaries(
    {
        "scheme": st.sampled_from(
            ["http", "https", "postgresql", "postgres", "mongodb+srv", "jdbc:postgresql", "ftp"]
        ),
        "param": st.sampled_from(
            [
                "password",
                "p",
                "pw",
                "token",
                "access_token",
                "api_key",
                "apikey",
                "key",
                "sig",
                "X-Amz-Signature",
                "X-Amz-Credential",
                "client_secret",
                "auth",
            ]
        ),
        "pem": st.sampled_from(["", "RSA ", "EC ", "ENCRYPTED ", "OPENSSH ", "DSA "]),
        "var": st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,15}\Z"),
    }
)
reference_texts = st.builds(
    lambda name, empty: f"${{{name}{':-' if empty else ''}}}",
    st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,15}\Z"),
    st.booleans(),
)
#: Where a value goes: key or list position steps, from the spec's top.
steps = st.lists(
    st.one_of(st.sampled_from(PATH_KEYS), st.tuples(st.integers(0, 3), st.integers(0, 2))),
    min_size=0,
    max_size=5,
)


def place(value: Any, key: str, path_steps: list[Any]) -> tuple[dict[str, Any], str]:
    """Return the seed spec with ``value`` under ``key`` at the end of ``path_steps`` (a key, or (index,
    padding): a list with ``index`` plain items before), and the expected dotted path."""
    node: Any = {key: value}
    path = key
    for step in reversed(path_steps):
        if isinstance(step, tuple):
            index, after = step
            node = ["plain"] * index + [node] + [{"name": "x"}] * after
            path = f"[{index}].{path}"
        else:
            node = {step: node}
            path = f"{step}.{path}"
    top = f"extra_{len(path_steps)}"
    spec = copy.deepcopy(SEED)
    spec[top] = node
    return spec, f"{top}.{path}".replace(".[", "[")


@given(st.sampled_from(sorted(FORMS)), st.data(), details, steps)
def test_a_clear_secret_in_any_form_at_any_depth_is_found_at_its_path(
    form: str, data: st.DataObject, d: dict[str, str], where: list[Any]
) -> None:
    strategy, holder, keys = FORMS[form]
    secret = data.draw(strategy, label="secret")
    key = data.draw(keys if keys is not None else st.sampled_from(PATH_KEYS), label="key")
    spec, path = place(holder(secret, d), key, where)
    assert find_clear_secrets(spec) == [path]
    with pytest.raises(SpecError) as info:
        check_clear_secrets(spec)
    assert info.value.message == f"{path}: a secret in clear text would be stored in the registry"
    assert secret not in str(info.value).replace(path, "")


@given(st.sampled_from(sorted(REFERENCES)), st.data(), details, reference_texts, steps)
def test_a_reference_in_the_same_places_is_never_found(
    form: str, data: st.DataObject, d: dict[str, str], ref: str, where: list[Any]
) -> None:
    holder, keys = REFERENCES[form]
    key = data.draw(keys if keys is not None else st.sampled_from(PATH_KEYS), label="key")
    spec, _ = place(holder(ref, d), key, where)
    assert find_clear_secrets(spec) == []
    check_clear_secrets(spec)


@given(st.sampled_from(SECRET_KEYS), st.sampled_from(PLAIN_KEYS), st.from_regex(r"\A[a-z][a-z0-9_]{0,8}\Z"))
def test_keys_are_told_apart_by_their_last_word(secret: str, plain: str, parent: str) -> None:
    assert is_secret_key(key_words(secret)) and is_secret_key(key_words(f"{parent}.{secret}"))
    assert not is_secret_key(key_words(plain))
    assert find_clear_secrets({plain: "a plain value"}) == []


def test_the_words_of_a_key() -> None:
    assert key_words("sasl.jaas.config") == ["sasl", "jaas", "config"]
    assert key_words("X-API-KEY") == ["x", "api", "key"]
    assert key_words("clientSecret") == ["client", "secret"]
    assert key_words("APIKey") == ["api", "key"]


def test_each_form_named_in_the_issue_is_found() -> None:
    spec = copy.deepcopy(SEED)
    spec["streams"][0]["consumer_config"] = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
        'password="hunter22";',
        "ssl.key.pem": _pem("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", ""),
        "ssl.keystore.password": "changeit1",
        "ssl.keystore.location": "/etc/kafka/keystore.jks",
    }
    spec["streams"][0]["bootstrap_servers"] = "u:hunter22@127.0.0.1:9092"
    spec["sinks"] = [
        {**spec.pop("sink"), "url": "http://admin:hunter22@influx:8086"},
        {
            "type": "influx",
            "url": "http://influx:8086?u=admin&p=hunter22",
            "database": "d",
            "measurement": "m",
        },
        {
            "type": "influx",
            "url": "${DAGGERS_INFLUX:-http://admin:hunter22@influx:8086}",
            "password": "${P:-x}",
            "database": "d",
            "measurement": "m",
        },
        {"type": "postgres", "dsn": "host=db user=u password=hunter22", "table": "t", "key_columns": ["a"]},
        {"type": "postgres", "dsn": "postgresql://u@db/x?password=hunter22", "table": "t"},
    ]
    spec["lookups"] = [
        {
            "type": "http",
            "url": "http://api/{city_id}?key=AIzaSyA1",
            "headers": {
                "Accept": "application/json",
                "Authorization": "Bearer abcdefgh",
                "X-Trace": "${TRACE}",
            },
        }
    ]
    spec["spark_conf"] = {
        "spark.hadoop.fs.s3a.secret.key": "${S3_SECRET:-wJalrXUtnFEMI}",
        "spark.sql.shuffle.partitions": "4",
    }
    assert find_clear_secrets(spec) == [
        "streams[0].bootstrap_servers",
        "streams[0].consumer_config.sasl.jaas.config",
        "streams[0].consumer_config.ssl.key.pem",
        "streams[0].consumer_config.ssl.keystore.password",
        "sinks[0].url",
        "sinks[1].url",
        "sinks[2].url",
        "sinks[2].password",
        "sinks[3].dsn",
        "sinks[4].dsn",
        "lookups[0].url",
        "lookups[0].headers.Authorization",
        "spark_conf.spark.hadoop.fs.s3a.secret.key",
    ]


def test_a_secret_in_a_default_that_yaml_reads_as_a_mapping_or_in_a_key_is_found() -> None:
    assert find_clear_secrets({"sink": "${S:-{type: influx, password: hunter22}}"}) == ["sink"]
    assert find_clear_secrets({"x": {"${K:-password}": "hunter22"}}) == ["x.${K:-password}"]
    assert find_clear_secrets({"x": {"http://u:hunter22@h": "y"}}) == ["x.http://u:hunter22@h"]
    numbers = {"sink": {"password": 12345678, "token": True, "api_key": None}}
    assert find_clear_secrets(numbers) == ["sink.password"]


def test_sql_comparisons_and_placeholders_are_not_settings() -> None:
    sql = SEED["sql"].replace("status = 'COMPLETED'", "status = 'COMPLETED' AND token = 'abc'")
    spec = {
        **SEED,
        "sql": sql,
        "lookups": [
            {
                "type": "http",
                "url": "http://api/x?key={city_id}&p={driver_id}",
                "verb": "POST",
                "body": {"token": "{session_token}", "api_key": "{customer_key}"},
            },
            {"type": "postgres", "query": "SELECT * FROM t WHERE password = $1 AND token = 'x'"},
        ],
    }
    assert find_clear_secrets(spec) == []


def test_an_alias_bomb_and_a_recursive_alias_are_walked_once() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)
    )
    data = yaml.safe_load(bomb + "password: hunter22\n")
    assert find_clear_secrets(data) == ["password"]
    loop = yaml.safe_load("x: &x {password: '${P}', self: *x, l: &l [*l, 'http://u:pw@h']}\n")
    assert find_clear_secrets(loop) == ["x.l[1]"]


#: job.spec's reading of a reference, line by line (a default never holds a newline).
_SPEC_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}\n]*))?\}")


@given(
    st.lists(
        st.sampled_from(["${", "}", ":-", "A", "b_", "\n", " ", "$", "{", "x:", "-", "9"]), max_size=30
    ).map("".join)
)
def test_references_are_read_as_the_spec_reads_them(text: str) -> None:
    assert references(text) == [(m.start(), m.end(), m.group(2)) for m in _SPEC_REF_RE.finditer(text)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "text",
    [
        "${A:-" * 50_000,
        "a://b:" * 40_000,
        "a." * 120_000 + "=",
        ("x://" + "a" * 100) * 2_000,
        "-----BEGIN " * 20_000,
        "a=" * 120_000,
    ],
    ids=["open defaults", "schemes", "dotted name", "urls", "pem starts", "assignments"],
)
def test_a_256_kib_value_built_to_backtrack_is_read_in_linear_time(text: str) -> None:
    assert find_clear_secrets({"description": text, "password": text}) == ["password"]


def test_a_cluster_is_named_in_the_message() -> None:
    with pytest.raises(SpecError) as info:
        check_clear_secrets(
            {"influx_url": "http://u:hunter22@h", "kafka_bootstrap": "h:9092"}, what="cluster"
        )
    assert info.value.message == "cluster influx_url: a secret in clear text would be stored in the registry"
    assert info.value.hint == (
        "write ${VARIABLE} instead and set the variable where the cluster's controller runs"
    )


def _dagger_specs() -> list[tuple[str, dict[str, Any]]]:
    from tests.docs.test_spec_examples import SPECS, spec_text

    found = [(b.where, yaml.safe_load(spec_text(b))) for b in SPECS]
    for path in sorted(ROOT.glob("examples/*.yaml")):
        found.append((str(path.relative_to(ROOT)), yaml.safe_load(path.read_text())))
    return found


DAGGER_SPECS = _dagger_specs()


@pytest.mark.parametrize("spec", [s for _, s in DAGGER_SPECS], ids=[w for w, _ in DAGGER_SPECS])
def test_the_docs_and_examples_dagger_specs_hold_no_clear_secret(spec: dict[str, Any]) -> None:
    assert find_clear_secrets(spec) == []


def test_every_dagger_spec_of_the_docs_and_examples_is_looked_at() -> None:
    assert len(DAGGER_SPECS) >= 17
    assert any(w == "examples/bookings-per-s2.yaml" for w, _ in DAGGER_SPECS)
