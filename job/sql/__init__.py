"""Dagger SQL: a Flink-style dialect translated to Spark SQL with small, pure AST rewrites."""

from job.sql.translate import Translation, translate

__all__ = ["Translation", "translate"]
