"""Secrets in clear text in a spec (or a cluster's settings), found as data: the one detector of every
entry point (create, edit, validate, check-edit, add cluster).

A secret is a reference, ``${NAME}``, resolved only where the dagger runs (the controller's host). Every
string of the mapping, at any depth and under any key, is looked at; a value holds a secret in clear when

- (a) its key says it is a secret (``password``, ``token``, ``api_key``, ``sasl.jaas.config``,
  ``ssl.key.pem``, an ``Authorization`` or ``Cookie`` header...) and it is more than references
  (``Bearer ${TOKEN}`` is allowed: a scheme word and references);
- (b) it holds a URL whose user info has a password (``http://u:pw@host``, also ``u:pw@host:9092``), or
  whose query has a credential parameter (``?password=``, ``?token=``, ``?p=``, ``?key=``, ``?sig=``...);
- (c) it holds ``password="..."`` (a JAAS config) or (e) ``password=...`` (a libpq DSN), or the like for
  any secret-looking name (not in SQL, where ``token = 'x'`` is a comparison);
- (d) it holds a PEM private key block;
- (f) a ``${NAME:-default}`` puts a secret there when ``NAME`` is unset: the default counts as written in
  the place of the reference (``${NAME:-}`` and ``${NAME}`` are references).

Nothing is resolved, read or fetched: this is data in, field paths out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

from job.errors import DaggerError, SpecError

_NAME_AT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: What a reference without a default becomes once defaults are put in place (never in a user's text).
_REF = "\ue000"
_WORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+\d*|[A-Z]+\d*|\d+")
#: Words that make a key a secret's when they are its last (head) word, or end it (``pgpassword``).
_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "pass",
        "passphrase",
        "secret",
        "secrets",
        "token",
        "apikey",
        "credential",
        "credentials",
        "authorization",
        "cookie",
        "jaas",
        "oauthbearer",
        "privatekey",
        "userinfo",
    }
)
_SECRET_ENDINGS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "credentials",
    "privatekey",
    "accesskey",
    "secretkey",
)
#: A head word that is a secret's after one of these words: api key, key pem, user info, basic auth.
_SECRET_PAIRS = {
    "key": frozenset(
        {
            "api",
            "private",
            "access",
            "secret",
            "signing",
            "encryption",
            "master",
            "account",
            "keystore",
            "client",
            "sas",
            "storage",
            "subscription",
            "shared",
            "session",
        }
    ),
    "pem": frozenset({"key"}),
    "info": frozenset({"user"}),
    "auth": frozenset({"basic", "http", "proxy"}),
}
#: Head words that say how a value is held, not what it is: ``sasl.jaas.config``, ``password_b64``.
_WRAPPERS = frozenset(
    {
        "config",
        "conf",
        "value",
        "values",
        "string",
        "str",
        "text",
        "data",
        "raw",
        "plain",
        "plaintext",
        "literal",
        "b64",
        "base64",
        "encoded",
        "hex",
    }
)
#: Keys whose value is a login module's options (``sasl.jaas.config``, ``sasl.oauthbearer.config``): the
#: options named like secrets must be references, the rest is configuration.
_OPTION_HEADS = frozenset({"jaas", "oauthbearer"})
#: Query parameters that carry a credential beyond the secret-looking names: InfluxDB's ``p``, an API
#: ``key``; and the last words of a signature's (``X-Amz-Signature``).
_QUERY_SECRETS = frozenset({"p", "pw", "key", "sig", "signature", "auth"})
_QUERY_SECRET_HEADS = frozenset({"sig", "signature"})
#: Keys whose text is SQL, where ``token = 'x'`` is a comparison, not a setting.
_SQL_KEYS = frozenset({"sql", "query", "where"})
#: A scheme word before a reference in a header: ``Bearer ${TOKEN}``.
_SCHEME_RE = re.compile(r"^\s*(?:bearer|basic|token|digest|apikey|api-key|oauth|key)\s+", re.IGNORECASE)
#: What is left of a value of references only: separators.
_SEPARATORS_RE = re.compile(r"[\s:;,/@=\"'-]*")
#: ``name=`` before a reference (a cookie's ``sid=${SID}``).
_NAME_RE = re.compile(r"(?<![\w.-])[A-Za-z_][\w.-]*\s*=\s*(?=\ue000)")
_URL_RE = re.compile(
    r"(?<![\w+.-])[A-Za-z][A-Za-z0-9+._-]*://(?P<authority>[^\s/?#]*)(?P<path>[^\s?#]*)"
    r"(?:\?(?P<query>[^\s#]*))?"
)
#: User info whose password holds ``/``, ``?`` or ``#`` (not percent-quoted): ``http://u:pa/ss@host``.
_LOOSE_USERINFO_RE = re.compile(
    r"(?<![\w+.-])[A-Za-z][A-Za-z0-9+._-]*://[^\s/:@]{1,256}:"
    r"(?P<password>[^\s@]{0,256})@"
)  # bounded: linear in the text
#: ``user:password@host[:port]`` without a scheme (a Kafka bootstrap server).
_BARE_USERINFO_RE = re.compile(
    r"^(?!mailto:)[^\s:/@]+:(?P<password>[^\s@/]+)@"
    r"[A-Za-z0-9._\[\]-]+(?::\d+)?(?:/\S*)?$"
)
_KV_RE = re.compile(
    r"(?<![\w.-])(?P<key>[A-Za-z_][\w.-]*)\s*=\s*(?:\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'|"
    r"(?P<bare>[^\s;&]+))"
)
#: ``key: value`` inside a default, which YAML may read as a mapping: ``${S:-{password: x}}``.
_COLON_KV_RE = re.compile(r"(?<![\w.-])(?P<key>[A-Za-z_][\w.-]*)\s*:\s+(?P<bare>[^\s,{}\[\]]+)")
_PEM_RE = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----")
#: An HTTP lookup's ``{column}``, where a row's value goes (in its URL and body).
_PLACEHOLDER_RE = re.compile(r"\{[A-Za-z_][\w.]*\}")
HINT = "write ${VARIABLE} instead and set the variable where the cluster's controller runs"


def key_words(key: str) -> list[str]:
    """Return the lower-case words of a key: ``sasl.jaas.config`` -> sasl, jaas, config; ``X-Api-Key`` ->
    x, api, key; ``clientSecret`` -> client, secret."""
    return [w.lower() for w in _WORD_RE.findall(key)]


def is_secret_key(words: list[str]) -> bool:
    """Whether a key (its words, see :func:`key_words`, the parents' first) names a secret.

    The last word decides, as in English (``token_count`` is a count, ``api_key`` a key), once words that
    only say how a value is held are dropped (``sasl.jaas.config`` is JAAS's).
    """
    words = list(words)
    while words and words[-1] in _WRAPPERS:
        words.pop()
    if not words:
        return False
    head = words[-1]
    if head in _SECRET_WORDS or head.endswith(_SECRET_ENDINGS):
        return True
    return len(words) > 1 and words[-2] in _SECRET_PAIRS.get(head, ())


def _options_key(words: list[str]) -> bool:
    """Whether a secret's key (see :func:`is_secret_key`) holds login-module options (JAAS)."""
    heads = [w for w in words if w not in _WRAPPERS]
    return bool(heads) and heads[-1] in _OPTION_HEADS


def _put_defaults(text: str) -> str:
    """Return ``text`` as it reads when no variable is set: each default in place of its reference, and
    :data:`_REF` for a reference without one (or with an empty one)."""
    text = text.replace(_REF, "\ufffd")
    out, at = [], 0
    for start, end, default in references(text):
        out += [text[at:start], default or _REF]
        at = end
    return "".join(out) + text[at:]


def references(text: str) -> list[tuple[int, int, str | None]]:
    """Return (start, end, default or None) of each ``${NAME}`` and ``${NAME:-default}`` in ``text``, as
    job.spec's interpolation reads them, line by line (a default ends at the first ``}`` of its line); in
    time linear in the text, however many ``${`` it holds."""
    found: list[tuple[int, int, str | None]] = []
    close = newline = -1
    i = text.find("${")
    while i != -1:
        name = _NAME_AT_RE.match(text, i + 2)
        j = name.end() if name else i + 2
        if name and text.startswith("}", j):
            found.append((i, j + 1, None))
            i = text.find("${", j + 1)
            continue
        if name and text.startswith(":-", j):
            if close < j + 2:
                close = text.find("}", j + 2)
                if close == -1:
                    break  # no } is left: no reference either
            if newline < j + 2:
                newline = text.find("\n", j + 2) % (len(text) + 1)  # -1: the end
            if close < newline:
                found.append((i, close + 1, text[j + 2 : close]))
                i = text.find("${", close + 1)
                continue
        i = text.find("${", j)
    return found


def _literal(value: str) -> bool:
    """Whether ``value`` (defaults put in) holds more than references and separators."""
    return bool(_SEPARATORS_RE.sub("", value.replace(_REF, "")))


def _url_secret(text: str) -> bool:
    for m in _URL_RE.finditer(text):
        userinfo, at, _ = m.group("authority").rpartition("@")
        if at and _literal(userinfo.partition(":")[2]):
            return True
        for pair in re.split(r"[&;]", m.group("query") or ""):
            name, _, value = pair.partition("=")
            words = key_words(unquote(name))
            if (
                unquote(name).lower() in _QUERY_SECRETS
                or words[-1:]
                and words[-1] in _QUERY_SECRET_HEADS
                or is_secret_key(words)
            ) and _literal(_PLACEHOLDER_RE.sub("", unquote(value))):
                return True
    for m in _LOOSE_USERINFO_RE.finditer(text):
        if _literal(m.group("password")) and not re.match(r"\d+(/|$)", m.group("password")):
            return True
    return any(
        m and _literal(m.group("password")) for m in map(_BARE_USERINFO_RE.match, re.split(r"[\s,]+", text))
    )


def _kv_secret(text: str, pattern: re.Pattern[str]) -> bool:
    for m in pattern.finditer(text):
        value = next(
            (g for g in (m.groupdict().get("dq"), m.groupdict().get("sq"), m.group("bare")) if g is not None),
            "",
        )
        if is_secret_key(key_words(m.group("key"))) and _literal(value):
            return True
    return False


def holds_secret(text: str, words: list[str] | None = None) -> bool:
    """Whether the string ``text``, under a key of ``words`` (none: anywhere), holds a secret in clear."""
    words = words or []
    put = _put_defaults(text)
    if is_secret_key(words):
        if any(default for _, _, default in references(text)):
            return True
        if _options_key(words):
            if "=" not in put and _literal(put):
                return True
        elif _literal(_PLACEHOLDER_RE.sub("", _NAME_RE.sub("", _SCHEME_RE.sub("", put, count=1)))):
            return True
    if _PEM_RE.search(put) or _url_secret(put):
        return True
    if (not words or words[-1] not in _SQL_KEYS) and _kv_secret(put, _KV_RE):
        return True
    return any(d and _kv_secret(d, _COLON_KV_RE) for _, _, d in references(text))


def _walk(data: Any, path: str, words: list[str]) -> Iterator[tuple[str, list[str], Any]]:
    """Yield (path, key words, value) for every scalar and key under ``data``, each shared node once (an
    alias bomb stays small; a recursive alias ends)."""
    seen: set[int] = set()
    stack: list[tuple[Any, str, list[str]]] = [(data, path, words)]
    while stack:
        node, where, ws = stack.pop()
        if isinstance(node, Mapping | list | tuple):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, Mapping):
                items = [
                    (f"{where}.{k}" if where else str(k), _child_words(ws, str(k)), v, k)
                    for k, v in node.items()
                ]
            else:
                items = [(f"{where}[{i}]", ws, v, None) for i, v in enumerate(node)]
            for child_path, child_words, value, key in reversed(items):
                stack.append((value, child_path, child_words))
                if isinstance(key, str):
                    stack.append((_Key(key), child_path, []))
        else:
            yield where, ws, node


#: Request headers that carry no credential: every other header's value must be a reference (a lookup's
#: headers are secrets in the spec's model: ``X-Auth: s3cr3t`` is one).
_PLAIN_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "content-type",
        "content-encoding",
        "cache-control",
        "user-agent",
        "connection",
        "pragma",
        "x-request-id",
    }
)
#: Settings whose any word (not only the last) makes them a secret's: a Spark or Hadoop setting names its
#: account or host last (``spark.hadoop.fs.azure.account.key.<acct>.blob.core.windows.net``).
_SETTINGS_PATHS = (
    ["spark", "conf"],
    ["streams", "consumer", "config"],
    ["sinks", "producer", "config"],
    ["sink", "producer", "config"],
)
_ANY_WORD_SECRETS = frozenset(
    {
        "password",
        "passwd",
        "secret",
        "token",
        "credential",
        "credentials",
        "sas",
        "apikey",
        "privatekey",
        "accesskey",
        "secretkey",
    }
)


def _child_words(parent: list[str], key: str) -> list[str]:
    """Return the key words of ``key`` under a mapping whose key words are ``parent``: a header other than
    :data:`_PLAIN_HEADERS`, or a setting with a secret word anywhere in its key, reads as a secret's."""
    words = [*parent, *key_words(key)]
    if parent == ["lookups", "headers"] and key.strip().lower() not in _PLAIN_HEADERS:
        return [*words, "secret"]
    if parent in _SETTINGS_PATHS:
        own = key_words(key)
        if any(w in _ANY_WORD_SECRETS for w in own) or any(
            a == "account" and b == "key" for a, b in zip(own, own[1:], strict=False)
        ):
            return [*words, "secret"]
    return words


class _Key(str):
    """A mapping's key, looked at as text anywhere (it is no secret's value)."""


def find_clear_secrets(data: Mapping[str, Any]) -> list[str]:
    """Return the dotted paths (``sinks[0].url``, ``lookups[1].headers.Authorization``) of the values of
    ``data`` that hold a secret in clear text, in the mapping's order, each once."""
    found: list[str] = []
    for where, words, value in _walk(data, "", []):
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            clear = is_secret_key(words)
        elif isinstance(value, str):
            clear = holds_secret(value, [] if isinstance(value, _Key) else words)
        else:
            continue
        if clear and where not in found:
            found.append(where)
    return found


def check_clear_secrets(
    data: Mapping[str, Any], what: str = "spec", *, error: type[DaggerError] = SpecError, hint: str = HINT
) -> None:
    """Raise ``error`` (SpecError) naming every field of ``data`` (a ``what``: a spec, a cluster) that holds a
    secret in clear text, with a hint to write ``${VARIABLE}``. The message never holds the value."""
    found = find_clear_secrets(data)
    if found:
        where = ", ".join(found) if what == "spec" else f"{what} {', '.join(found)}"
        raise error(f"{where}: a secret in clear text would be stored in the registry", hint=hint)
