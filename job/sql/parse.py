"""Parse Dagger SQL into a sqlglot AST, with errors that carry line and column."""

from __future__ import annotations

import logging
import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from job.errors import SqlError
from job.sql.dialect import DaggerSql

_TOKEN_RE = re.compile(r"<Token token_type: [^,]+, text: (.*?), line: \d+.*?>")
# sqlglot logs what a dialect cannot express as warnings on stderr; a dagger's errors are SqlErrors, and
# the rewrites leave nothing for the Spark generator to warn about (tests/job/sql/test_dialect.py)
logging.getLogger("sqlglot").setLevel(logging.ERROR)
READ_DIALECT = (
    DaggerSql  # Spark's grammar with Flink/Calcite's strings and datetime patterns (job.sql.dialect)
)


def position(node: exp.Expr | None) -> tuple[int | None, int | None]:
    """Return the (line, column) of the first token of ``node`` that sqlglot located."""
    if node is None:
        return None, None
    best: tuple[int, int] | None = None
    for sub in node.walk():
        meta = sub.meta if isinstance(sub, exp.Expression) else {}
        if "line" in meta:
            start_col = meta["col"] - (meta["end"] - meta["start"])
            here = (meta["line"], max(start_col, 1))
            best = here if best is None or here < best else best
    return best if best else (None, None)


#: Tokens after which a comma has nothing before it: an empty first item
_LIST_OPENS = frozenset(
    {
        TokenType.L_PAREN,
        TokenType.L_BRACKET,
        TokenType.SELECT,
        TokenType.DISTINCT,
        TokenType.GROUP_BY,
        TokenType.ORDER_BY,
        TokenType.PARTITION_BY,
    }
)
#: Tokens before which a comma has nothing after it: an empty last item
_LIST_ENDS = frozenset(
    {
        TokenType.R_PAREN,
        TokenType.R_BRACKET,
        TokenType.FROM,
        TokenType.WHERE,
        TokenType.GROUP_BY,
        TokenType.HAVING,
        TokenType.ORDER_BY,
        TokenType.LIMIT,
        TokenType.UNION,
        TokenType.WINDOW,
        TokenType.QUALIFY,
        TokenType.SEMICOLON,
    }
)


def _word(tok: Token) -> str:
    word = " ".join(tok.text.split()).upper()
    return word if word[:1].isalpha() else f"'{word}'"


def _empty_items(tokens: list[Token]) -> None:
    """Raise SqlError at a comma with nothing on one side: ``a,, b``, ``SELECT , a``, ``f(a, )``, ``a, FROM``.
    sqlglot drops the empty item and reads on, so the query would run as if the comma were not there."""
    for i, tok in enumerate(tokens):
        if tok.token_type != TokenType.COMMA:
            continue
        prev = tokens[i - 1] if i else None
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if prev is not None and prev.token_type == TokenType.COMMA:
            reason, hint = (
                "two commas with nothing between them",
                "remove one of the commas, or put the item between them",
            )
        elif prev is None or prev.token_type in _LIST_OPENS:
            after = f" after {_word(prev)}" if prev is not None else ""
            reason, hint = f"a comma{after} with nothing before it", "remove the comma"
        elif nxt is None:
            reason, hint = "a comma at the end with nothing after it", "remove the trailing comma"
        elif nxt.token_type in _LIST_ENDS:
            reason, hint = f"a comma before {_word(nxt)} with nothing after it", "remove the trailing comma"
        else:
            continue
        raise SqlError(reason, line=tok.line, col=tok.col, hint=hint)


def _start_of(text: str, line: int | None, col: int | None, word: str) -> int | None:
    """Return the column where ``word`` starts, given the (line, column) of its last character as sqlglot
    reports a parse error: the caret goes where the parser stopped, not to the end of the word."""
    lines = text.split("\n")
    if line is None or col is None or not word or "\n" in word or not 0 < line <= len(lines):
        return col
    start = col - len(word) + 1
    return start if start >= 1 and lines[line - 1][start - 1 : col] == word else col


#: The largest query text and AST accepted: a query runs in a server's check and preview, so its cost is
#: bounded (a real dagger query has a few hundred nodes; 2,000 ORs took a minute of a server's CPU).
MAX_QUERY_CHARS = 32 * 1024
MAX_QUERY_NODES = 3_000


#: The largest literal ``sequence(a, b)`` span and ``repeat(s, n)`` count: one row must not fill the JVM's
#: heap (sequence(1, 300000000) did, in a server's preview).
MAX_SEQUENCE = 1_000_000
MAX_REPEAT = 100_000


def _literal_int(node: exp.Expr | None) -> int | None:
    if isinstance(node, exp.Neg):
        inner = _literal_int(node.this)
        return -inner if inner is not None else None
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(float(node.this))
        except (ValueError, OverflowError):
            return None
    return None


def check_escapes(tree: exp.Expr) -> None:
    """Raise SqlError at a construct that reaches outside the query's rows: a script transform
    (``TRANSFORM (...) USING 'command'``, Hive's MAP/REDUCE) runs a command on the host; and at a literal
    ``sequence``/``repeat`` that would make one row larger than a JVM's heap."""
    for node in tree.walk():
        line, col = position(node)
        if isinstance(node, exp.QueryTransform) or node.args.get("command_script") is not None:
            raise SqlError(
                "TRANSFORM ... USING runs a command: it is not available in Dagger SQL",
                line=line,
                col=col,
                hint="write the expression in SQL, or as a udf_file function",
            )
        if isinstance(node, exp.GenerateSeries):
            start, end = _literal_int(node.args.get("start")), _literal_int(node.args.get("end"))
            if start is not None and end is not None and abs(end - start) > MAX_SEQUENCE:
                raise SqlError(f"sequence() of more than {MAX_SEQUENCE:,} values", line=line, col=col)
        if isinstance(node, exp.Repeat):
            times = _literal_int(node.args.get("times"))
            if times is not None and times > MAX_REPEAT:
                raise SqlError(f"repeat() more than {MAX_REPEAT:,} times", line=line, col=col)


def _check_size(tree: exp.Expr) -> None:
    for count, _ in enumerate(tree.walk(), start=1):
        if count > MAX_QUERY_NODES:
            raise SqlError(
                f"the query is too large: more than {MAX_QUERY_NODES:,} parts",
                hint="split it into several daggers, or use IN (...) for long lists of values",
            )


def parse_condition(text: str) -> exp.Expr:
    """Return the AST of a Spark SQL condition (a transformer's ``where``), checked as a query's: bounded,
    no script transform, no function outside Dagger SQL's. Raises SqlError."""
    if len(text) > MAX_QUERY_CHARS:
        raise SqlError(f"the condition is longer than {MAX_QUERY_CHARS // 1024} KiB")
    try:
        _empty_items(sqlglot.tokenize(text, read=READ_DIALECT))
        tree = sqlglot.parse_one(text, read=READ_DIALECT)
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        raise SqlError(f"cannot read the condition {text[:200]!r}: {first.get('description', exc)}") from None
    except (TokenError, RecursionError):
        raise SqlError(f"cannot read the condition {text[:200]!r}: nested too deep or not SQL") from None
    except SqlError as exc:
        raise SqlError(f"cannot read the condition {text[:200]!r}: {exc.message}", hint=exc.hint) from None
    _check_size(tree)
    check_escapes(tree)
    sub = next(tree.find_all(exp.Select, exp.Table, exp.Subquery), None)
    if sub is not None:
        raise SqlError(
            f"the condition {text[:200]!r} reads a table or a query: a condition is on the record's "
            "own columns"
        )
    return tree


#: A hint for a parse error near a word that Flink reads and Dagger SQL does not
_PARSE_HINTS = {
    "RETURNING": "JSON_VALUE/JSON_QUERY (… RETURNING type) are not supported: JsonQuery(json, path) gives the value "
    "as text; CAST it to the type",
}


def parse(text: str) -> exp.Query:
    """Return the AST of one SELECT statement (optionally with UNION ALL).

    Raises SqlError with the line and column of the first problem, for a query longer than
    :data:`MAX_QUERY_CHARS` or larger than :data:`MAX_QUERY_NODES`, and for a script transform.
    """
    if not text.strip():
        raise SqlError("the query is empty", line=1, col=1)
    if len(text) > MAX_QUERY_CHARS:
        raise SqlError(
            f"the query is longer than {MAX_QUERY_CHARS // 1024} KiB",
            hint="split it into several daggers, or use IN (...) for long lists of values",
        )
    try:
        tokens = sqlglot.tokenize(text, read=READ_DIALECT)
        _empty_items(tokens)
        trees = sqlglot.parse(text, read=READ_DIALECT)
    except RecursionError:
        raise SqlError("the query is nested too deep") from None
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        desc = _TOKEN_RE.sub(lambda m: repr(m.group(1)), first.get("description", str(exc)))
        near = first.get("highlight") or ""
        raise SqlError(
            f"{desc}" + (f" (near {near!r})" if near else ""),
            line=first.get("line"),
            col=_start_of(text, first.get("line"), first.get("col"), near),
            hint=_PARSE_HINTS.get(near.upper()),
        ) from None
    except TokenError as exc:
        raise SqlError(f"cannot read the query: {exc}") from None
    statements = [t for t in trees if t is not None]
    if len(statements) != 1:
        raise SqlError(f"a dagger runs exactly one query; found {len(statements)} statements")
    tree = statements[0]
    if not isinstance(tree, exp.Query):
        line, col = position(tree)
        raise SqlError(f"a dagger query is a SELECT; found {tree.key.upper()}", line=line or 1, col=col or 1)
    _check_size(tree)
    check_escapes(tree)
    return tree
