"""The sqlglot dialect that reads Dagger SQL as Flink/Calcite writes it.

Spark's dialect reads most of it (back-quoted names, ``INTERVAL '1' MINUTE``, the functions), with
three differences that change a query's meaning, fixed here:

* strings: ``''`` inside a string is a quote and a backslash is just a backslash (Calcite), where
  Spark reads ``\\'`` as a quote and ``'a' 'b'`` as one string: ``DATE_FORMAT(ts, 'yyyy-MM-dd''T''HH')``
  keeps its quoted ``'T'``;
* datetime patterns (``DATE_FORMAT``, ``FROM_UNIXTIME``, ``UNIX_TIMESTAMP``) are kept as the Java
  pattern the user wrote, not mapped through strftime and back (which turned ``Y`` into ``yyyy``);
  :mod:`job.sql.flink` checks them;
* Flink's type name ``BYTES`` parses as a type, and ``SESSION(rowtime, gap)`` as a call;
* a simple ``CASE x WHEN 'a', 'b' THEN ...`` may list several values in a WHEN (Flink/Calcite): the CASE
  reads as ``CASE WHEN x IN ('a', 'b') THEN ... WHEN x = 'c' THEN ...``;
* a window table-valued function's table argument, ``TUMBLE(TABLE t, DESCRIPTOR(rowtime), ...)`` (and
  ``TABLE t PARTITION BY (k1, k2)``), reads as a call ``TABLE(t)`` (``TABLE(t, PARTITION_BY(k))``), which
  :mod:`job.sql.window_tvf` rewrites.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import Token, TokenType

_SIMPLE = (exp.Column, exp.Literal, exp.Func, exp.Dot, exp.Paren, exp.Bracket)


def _when(subject: exp.Expr, values: list[exp.Expr | None]) -> exp.Expr:
    """``x IN (v1, v2)`` (``x = v`` for one value) for a WHEN of ``CASE x``."""
    left = subject.copy() if isinstance(subject, _SIMPLE) else exp.Paren(this=subject.copy())
    if len(values) == 1:
        return exp.EQ(this=left, expression=values[0])
    return exp.In(this=left, expressions=values)


def _log10(args: list[exp.Expr]) -> exp.Expr:
    log = exp.Log(this=exp.Literal.number(10), expression=args[0] if args else None)
    log.meta["flink_log10"] = True
    return log


class DaggerSql(Spark):
    """Flink/Calcite's lexical rules on top of Spark's grammar (registered in sqlglot as ``daggersql``)."""

    TIME_MAPPING: dict[str, str] = {}  # datetime patterns stay the Java patterns the user wrote

    class Tokenizer(Spark.Tokenizer):
        STRING_ESCAPES = ["'"]  # Calcite: '' is a quote inside a string; a backslash is itself
        # SESSION(rowtime, gap) is Flink's session window, not a keyword
        KEYWORDS = {
            **{k: v for k, v in Spark.Tokenizer.KEYWORDS.items() if k != "SESSION"},
            "BYTES": TokenType.VARBINARY,
        }

    class Parser(SparkParser):  # Spark.Parser, by the class's own name (the dialect's is a plain attribute)
        PRIMARY_PARSERS = {
            **SparkParser.PRIMARY_PARSERS,
            TokenType.TABLE: lambda self, token: self._parse_table_argument(token),
        }
        # LOG10(x) is LOG(10, x) marked as LOG10 (job.sql.flink_builtins: Flink's Math.log10, not a quotient)
        FUNCTIONS = {**SparkParser.FUNCTIONS, "LOG10": lambda args: _log10(args)}

        def _parse_table_argument(self, token: Token) -> exp.Expr | None:
            """Flink's ``TABLE t [PARTITION BY k, ...]`` as an argument of a call; None (nothing read) otherwise."""
            before = self._tokens[self._index - 2] if self._index >= 2 else None
            if (
                before is None
                or before.token_type not in (TokenType.L_PAREN, TokenType.COMMA, TokenType.FARROW)
                or self._curr is None
                or self._curr.token_type == TokenType.L_PAREN
            ):
                self._retreat(self._index - 1)
                return None
            table = self._parse_table_parts()
            args: list[exp.Expr] = [table] if table is not None else []
            if self._match(TokenType.PARTITION_BY):
                key = self._parse_disjunction()  # PARTITION BY k, or PARTITION BY (k1, k2)
                keys = (
                    list(key.expressions) if isinstance(key, exp.Tuple) else [key] if key is not None else []
                )
                args.append(self.expression(exp.Anonymous(this="PARTITION_BY", expressions=keys)))
            return self.expression(exp.Anonymous(this="TABLE", expressions=args)).update_positions(token)

        def _parse_case(self) -> exp.Expr | None:
            """sqlglot's CASE, with several values in a WHEN of a simple CASE (Flink's ``WHEN 'a', 'b'``)."""
            if self._match(TokenType.DOT, advance=False):
                return super()._parse_case()  # case.* is a column
            comments = self._prev_comments
            subject = self._parse_disjunction()
            whens: list[tuple[list[exp.Expr | None], exp.Expr | None]] = []
            while self._match(TokenType.WHEN):
                values = [self._parse_disjunction()]
                if values[0] is None:
                    self.raise_error("Expected a value or a condition after WHEN")
                while subject is not None and self._match(TokenType.COMMA):
                    values.append(self._parse_disjunction())
                    if values[-1] is None:
                        self.raise_error("Expected a value after the comma in WHEN")
                self._match(TokenType.THEN)
                whens.append((values, self._parse_disjunction()))
            default = self._parse_disjunction() if self._match(TokenType.ELSE) else None
            if not self._match(TokenType.END):
                if isinstance(default, exp.Interval) and default.this.sql().upper() == "END":
                    default = exp.column("interval")
                else:
                    self.raise_error("Expected END after CASE", self._prev)
            if subject is not None and any(len(values) > 1 for values, _ in whens):
                ifs = [
                    self.expression(exp.If(this=_when(subject, values), true=then)) for values, then in whens
                ]
                return self.expression(exp.Case(ifs=ifs, default=default), comments=comments)
            ifs = [self.expression(exp.If(this=values[0], true=then)) for values, then in whens]
            return self.expression(exp.Case(this=subject, ifs=ifs, default=default), comments=comments)
