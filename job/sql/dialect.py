"""The sqlglot dialect that reads Dagger SQL as Flink/Calcite writes it.

Spark's dialect reads most of it (back-quoted names, ``INTERVAL '1' MINUTE``, the functions), with
three differences that change a query's meaning, fixed here:

* strings: ``''`` inside a string is a quote and a backslash is just a backslash (Calcite), where
  Spark reads ``\\'`` as a quote and ``'a' 'b'`` as one string: ``DATE_FORMAT(ts, 'yyyy-MM-dd''T''HH')``
  keeps its quoted ``'T'``;
* datetime patterns (``DATE_FORMAT``, ``FROM_UNIXTIME``, ``UNIX_TIMESTAMP``) are kept as the Java
  pattern the user wrote, not mapped through strftime and back (which turned ``Y`` into ``yyyy``);
  :mod:`job.sql.flink` checks them;
* Flink's type name ``BYTES`` parses as a type, and ``SESSION(rowtime, gap)`` as a call.
"""

from __future__ import annotations

from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType


class DaggerSql(Spark):
    """Flink/Calcite's lexical rules on top of Spark's grammar (registered in sqlglot as ``daggersql``)."""

    TIME_MAPPING: dict[str, str] = {}  # datetime patterns stay the Java patterns the user wrote

    class Tokenizer(Spark.Tokenizer):
        STRING_ESCAPES = ["'"]  # Calcite: '' is a quote inside a string; a backslash is itself
        # SESSION(rowtime, gap) is Flink's session window, not a keyword
        KEYWORDS = {**{k: v for k, v in Spark.Tokenizer.KEYWORDS.items() if k != "SESSION"},
                    "BYTES": TokenType.VARBINARY}
