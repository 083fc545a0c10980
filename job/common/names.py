"""The rules for names, defined once: what a dagger, a sink, a lookup or an alert rule may be called, and
what a user, a team, a cluster or a data centre may be called.

A name must match its rule as a whole. Python's ``$`` also matches before a trailing newline, so
``re.match("^[a-z]+$", "pg-var\\n")`` accepted ``pg-var\\n`` and ``daggers dagger list`` showed two rows
that looked the same: the compiled rules here are anchored with ``\\A`` and ``\\Z``, and :func:`is_name`
uses ``fullmatch``. The ``*_PATTERN`` strings are the same rules for JSON Schema and pydantic (ECMA and
Rust regular expressions, where ``$`` is the end of the text and ``\\Z`` does not exist).
"""

from __future__ import annotations

import re

#: Daggers, sinks, lookups and alert rules: 2-63 lower-case letters, digits or dashes, starting with a letter.
DAGGER_NAME = "[a-z][a-z0-9-]{1,62}"
DAGGER_NAME_RE = re.compile(rf"\A{DAGGER_NAME}\Z")
DAGGER_NAME_RULE = "2-63 lower-case letters, digits or dashes, starting with a letter"

#: Users, teams, clusters and data centres: 1-63 lower-case letters, digits, ``.``, ``_`` or ``-``, starting
#: with a letter.
REGISTRY_NAME = "[a-z][a-z0-9._-]{0,62}"
REGISTRY_NAME_RE = re.compile(rf"\A{REGISTRY_NAME}\Z")
REGISTRY_NAME_PATTERN = f"^{REGISTRY_NAME}$"
REGISTRY_NAME_RULE = "1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter"


#: SQL and spec identifiers (a column, a table, a stream's table name): a letter or ``_``, then letters, digits
#: or ``_``.
IDENTIFIER = "[A-Za-z_][A-Za-z0-9_]*"
IDENTIFIER_RE = re.compile(rf"\A{IDENTIFIER}\Z")


def is_name(name: object, rule: re.Pattern[str] = DAGGER_NAME_RE) -> bool:
    """Return whether ``name`` is a string that matches ``rule`` as a whole (a trailing newline does not)."""
    return isinstance(name, str) and rule.fullmatch(name) is not None
