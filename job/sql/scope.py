"""Column scope as Flink/Calcite resolves it: each SELECT sees only the sources of its own FROM.

A source is a stream table, a common table expression, a subquery in FROM, an ``UNNEST`` or a
``LATERAL TABLE``. A column ``c`` is looked up in the sources of its own SELECT (a subquery in WHERE
may also see its enclosing SELECT's), a column ``t.c`` in source ``t``, and any further parts
(``t.c.f.g`` or ``c.f.g``) are fields of nested messages, checked against the column's type when
the stream's schema gives it. Unknown and ambiguous names raise :class:`~job.errors.SqlError` at
their line and column with a suggestion.

:func:`resolve` also leaves what the UNNEST rewrite needs on the tree (``meta``, which copies and
transforms keep): the kind of each ``UNNEST`` (:data:`UNNEST_KIND`: ``map``, ``rows`` or ``array``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.scope import Scope, ScopeType, traverse_scope

from job.errors import SqlError
from job.sql.catalog import DAGGER_FUNCTIONS
from job.sql.dedup import DEDUP_META
from job.sql.infer import TYPE_META, infer
from job.sql.parse import READ_DIALECT, position

TIME_COLUMN = "rowtime"
UNNEST_KIND = "dagger_unnest"  # meta key on an Unnest: "map" | "rows" | "array" (absent: type unknown)
_TIMESTAMP = "TIMESTAMP"

ColumnTypes = dict[str, exp.DataType | None]  # column -> its type (None: not known)


@cache
def _parse_type(text: str) -> exp.DataType:
    return exp.DataType.build(text, dialect=READ_DIALECT)


def column_types(tables: Mapping[str, Iterable[str] | Mapping[str, str | None]]) -> dict[str, ColumnTypes]:
    """Normalise a catalog (table -> column names, or table -> column -> Spark type text) to types."""
    out: dict[str, ColumnTypes] = {}
    for table, cols in tables.items():
        if isinstance(cols, Mapping):
            out[table] = {c: _parse_type(t) if t else None for c, t in cols.items()}
        else:
            out[table] = dict.fromkeys(cols)
    return out


#: Flink's wall-clock names written without parentheses, which read as columns here
WALL_CLOCK_NAMES = frozenset({"LOCALTIMESTAMP", "LOCALTIME", "CURRENT_TIME"})


@dataclass
class Source:
    """One name a SELECT's FROM defines, with the columns it offers (None: not known, e.g. ``SELECT *``)."""

    name: str
    columns: ColumnTypes | None
    stream: str | None = None  # the stream table it reads directly

    def has(self, column: str) -> bool:
        return self.columns is None or column in self.columns


@dataclass
class Resolution:
    """What :func:`resolve` found: the columns each stream table must provide."""

    used: dict[str, set[str]] = field(default_factory=dict)
    #: The query's output column names, in order; None when a name cannot be told before Spark runs (an
    #: expression without an alias, a star over what is not known).
    output: list[str] | None = None


def _fail(message: str, node: exp.Expr | None, hint: str | None = None) -> SqlError:
    line, col = position(node)
    return SqlError(message, line=line, col=col, hint=hint)


def _deduplicated(select: exp.Select) -> bool:
    """Whether ``select`` is a deduplication's subquery (its ``*`` hands rowtime on: job.sql.dedup)."""
    return isinstance(select.parent, exp.Subquery) and DEDUP_META in select.parent.meta


def suggest(name: str, options: Iterable[str]) -> str | None:
    """Return a 'did you mean' hint for ``name`` among ``options`` (or the list of options)."""
    opts = sorted(options)
    close = difflib.get_close_matches(name, opts, n=3)
    if close:
        return f"did you mean {', '.join(close)}?"
    return f"columns: {', '.join(opts)}" if opts else None


def _path(col: exp.Column) -> tuple[list[str], exp.Expr]:
    """Return the dotted parts of a column reference (``a.b.c.d.e`` → five names) and its outermost node."""
    parts = [p.name for p in col.parts]
    node: exp.Expr = col
    while isinstance(node.parent, exp.Dot) and node.parent.this is node:
        node = node.parent
        parts.append(node.expression.name)
    return parts, node


def _field_type(kind: exp.DataType | None, name: str) -> tuple[bool, exp.DataType | None, list[str]]:
    """Return (found, field type, field names) of ``name`` in a struct type (found when not a struct)."""
    if kind is None or kind.this != exp.DataType.Type.STRUCT:
        return True, None, []
    fields = {d.name: d.args.get("kind") for d in kind.expressions if isinstance(d, exp.ColumnDef)}
    return name in fields, fields.get(name), list(fields)


def _map_constructor(col: exp.Column) -> bool:
    """Whether ``col`` is the MAP of Flink's ``MAP['k', v]``."""
    return (
        col.name.upper() == "MAP"
        and not col.this.quoted
        and isinstance(col.parent, exp.Bracket)
        and col.parent.this is col
    )


def _in_lambda(col: exp.Column) -> bool:
    lam = col.find_ancestor(exp.Lambda)
    while lam is not None:
        if col.name in {p.name for p in lam.expressions} and not col.table:
            return True
        lam = lam.find_ancestor(exp.Lambda)
    return False


class _Resolver:
    def __init__(self, tables: dict[str, ColumnTypes]) -> None:
        self.tables = tables
        self.outputs: dict[int, ColumnTypes | None] = {}  # id(scope) -> its output columns
        self.types: dict[int, exp.DataType | None] = {}  # id(column reference node) -> its type
        self.used: dict[str, set[str]] = {t: set() for t in tables}
        self._sources: dict[int, dict[str, Source]] = {}

    # -- sources --------------------------------------------------------------------------------

    def stream_columns(self, table: str) -> ColumnTypes:
        return {**self.tables[table], TIME_COLUMN: _parse_type(_TIMESTAMP)}

    def sources(self, scope: Scope) -> dict[str, Source]:
        if id(scope) not in self._sources:
            self._sources[id(scope)] = self._build_sources(scope)
        return self._sources[id(scope)]

    def _build_sources(self, scope: Scope) -> dict[str, Source]:
        out: dict[str, Source] = {}
        if scope.scope_type == ScopeType.UDTF:
            named = dict(scope.sources)  # an UNNEST sees the sources before it
        else:
            try:
                named = {name: src for name, (_, src) in scope.selected_sources.items()}
            except OptimizeError as exc:  # the same alias twice
                raise _fail(str(exc), scope.expression) from None
        for name, src in named.items():
            if isinstance(src, exp.Table):
                stream = src.name if src.name in self.tables else None
                out[name] = Source(name, self.stream_columns(stream) if stream else None, stream)
            elif isinstance(src, Scope):
                if src.scope_type == ScopeType.UDTF:
                    out[name] = Source(name, self.udtf_columns(src))
                else:
                    out[name] = Source(name, self.renamed(src, self.outputs.get(id(src))))
        return out

    @staticmethod
    def renamed(src: Scope, columns: ColumnTypes | None) -> ColumnTypes | None:
        """Apply ``AS t (a, b)`` (a subquery's or CTE's column list) to a source's output columns."""
        holder = src.expression.parent
        alias = holder.args.get("alias") if isinstance(holder, exp.Subquery | exp.CTE) else None
        names = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) and alias.columns else []
        if not names:
            return columns
        types = list(columns.values()) if columns is not None else []
        return {n: types[i] if i < len(types) else None for i, n in enumerate(names)}

    def udtf_columns(self, scope: Scope) -> ColumnTypes | None:
        node = scope.expression
        alias = node.args.get("alias")
        names = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
        if isinstance(node, exp.Lateral):  # LATERAL TABLE(F(...)) AS T(c1, ...)
            call = (
                node.this.expressions[0]
                if isinstance(node.this, exp.Anonymous) and node.this.expressions
                else None
            )
            fn = DAGGER_FUNCTIONS.get(str(call.name).lower()) if isinstance(call, exp.Anonymous) else None
            cols = names or list(fn.columns if fn else ())
            return dict.fromkeys(cols) if cols else None
        if not isinstance(node, exp.Unnest):
            return dict.fromkeys(names) if names else None
        return self.unnest_columns(scope, node, names)

    def unnest_columns(self, scope: Scope, node: exp.Unnest, names: list[str]) -> ColumnTypes | None:
        """The columns of ``UNNEST(x) AS t (c1, ...)``: a map gives (key, value), an array of messages one
        column per field, any other array one column; sets the Unnest's kind for the rewrite."""
        args = node.expressions
        if len(args) != 1:
            raise _fail(f"UNNEST takes one array or map, found {len(args)}", node)
        kind = self.expr_type(args[0], scope)
        defaults: list[tuple[str, exp.DataType | None]] | None = None
        if kind is not None and kind.this == exp.DataType.Type.MAP:
            node.meta[UNNEST_KIND] = "map"
            defaults = [("key", kind.expressions[0]), ("value", kind.expressions[1])]
        elif kind is not None and kind.this == exp.DataType.Type.ARRAY:
            element = kind.expressions[0] if kind.expressions else None
            if element is not None and element.this == exp.DataType.Type.STRUCT:
                node.meta[UNNEST_KIND] = "rows"
                defaults = [(d.name, d.args.get("kind")) for d in element.expressions]
            else:
                node.meta[UNNEST_KIND] = "array"
                alias = node.args.get("alias")
                defaults = [(alias.name if alias is not None and alias.name else "f0", element)]
        elif kind is not None:
            raise _fail(
                f"UNNEST needs an array or a map; {args[0].sql(dialect='spark')} is "
                f"{kind.sql(dialect='spark')}",
                args[0],
            )
        if defaults is None:
            return dict.fromkeys(names) if names else None
        if names and len(names) != len(defaults):
            alias = node.args["alias"]
            raise _fail(
                f"UNNEST({args[0].sql(dialect='spark')}) gives {len(defaults)} column(s) "
                f"({', '.join(n for n, _ in defaults)}), found {len(names)} names",
                alias.columns[0],
                hint="name every column: AS t (" + ", ".join(n for n, _ in defaults) + ")",
            )
        return {(names[i] if names else n): t for i, (n, t) in enumerate(defaults)}

    # -- columns --------------------------------------------------------------------------------

    def expr_type(self, node: exp.Expr, scope: Scope) -> exp.DataType | None:
        """The type of a column reference (plain or dotted) when known, resolving it in ``scope``."""
        col = node.find(exp.Column) if isinstance(node, exp.Dot) else node
        if not isinstance(col, exp.Column) or isinstance(col.this, exp.Star):
            return None
        _, top = _path(col)
        if top is not node:
            return None
        if id(top) not in self.types:
            self.column(col, scope, self.sources(scope))
        return self.types.get(id(top))

    def column(self, col: exp.Column, scope: Scope, sources: dict[str, Source]) -> None:
        parts, top = _path(col)
        if len(parts) == 1 and (_in_lambda(col) or _map_constructor(col)):
            return
        found = self.lookup(parts, col, scope, sources)
        if found is None:
            return
        src, name, fields = found
        kind = src.columns.get(name) if src.columns is not None else None
        if src.stream is not None and name != TIME_COLUMN:
            self.used[src.stream].add(name)
        for i, part in enumerate(fields):
            ok, kind, names = _field_type(kind, part)
            if not ok:
                owner = ".".join([name, *fields[:i]])
                raise _fail(f"{owner} has no field {part}", col, hint=suggest(part, names))
        self.types[id(top)] = kind
        if kind is not None:
            top.meta[TYPE_META] = kind  # for the rewrites that keep Flink's values (job.sql.values)

    def lookup(
        self, parts: list[str], col: exp.Column, scope: Scope, sources: dict[str, Source]
    ) -> tuple[Source, str, list[str]] | None:
        """Return (source, column, nested fields) of a reference; None for a name that needs no source."""
        if len(parts) > 1 and parts[0] in sources:
            src = sources[parts[0]]
            if not src.has(parts[1]):
                what = f"table {src.stream}" if src.stream else src.name or "the subquery"
                raise _fail(
                    f"{what} has no column {parts[1]}", col, hint=suggest(parts[1], src.columns or {})
                )
            return src, parts[1], parts[2:]
        if parts[0] == "window" and len(parts) > 1:
            return None  # window.start / window.end of a rewritten query
        owners = [s for s in sources.values() if s.has(parts[0])]
        known = [s for s in owners if s.columns is not None]
        if len(known) > 1:
            names = [s.stream or s.name for s in known]
            raise _fail(f"column {parts[0]} is in {' and '.join(names)}; qualify it", col)
        if known or owners:
            return (known or owners)[0], parts[0], parts[1:]
        if len(parts) == 1 and parts[0] in _select_aliases(scope):
            return None
        parent = scope.parent if scope.scope_type in (ScopeType.SUBQUERY, ScopeType.UDTF) else None
        if parent is not None:
            return self.lookup(parts, col, parent, self.sources(parent))
        if len(parts) > 1:
            raise _fail(
                f"unknown table or alias {parts[0]} in {'.'.join(parts)}",
                col,
                hint=f"tables here: {', '.join(sorted(n for n in sources if n))}" if sources else None,
            )
        every = {c for s in sources.values() for c in (s.columns or {})}
        if len(parts) == 1 and parts[0].upper() in WALL_CLOCK_NAMES:
            raise _fail(
                f"{parts[0].upper()} (the wall clock's time of day or timestamp) is not supported",
                col,
                hint="a dagger judges rows by event time: use rowtime, or CURRENT_TIMESTAMP (one value a micro-batch)",
            )
        raise _fail(f"unknown column {parts[0]}", col, hint=suggest(parts[0], every - {TIME_COLUMN}))

    def stars(self, scope: Scope, sources: dict[str, Source]) -> ColumnTypes | None:
        """Mark every column a ``*`` or ``t.*`` reads as used; return what it expands to."""
        select = scope.expression
        if not isinstance(select, exp.Select):
            return {}
        out: ColumnTypes | None = {}
        for item in select.expressions:
            star = (
                item
                if isinstance(item, exp.Star)
                else item.this
                if isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
                else None
            )
            if star is None:
                continue
            qual = item.table if isinstance(item, exp.Column) else ""
            if qual and qual not in sources:
                raise _fail(f"unknown table or alias {qual} in {qual}.*", item)
            for src in [sources[qual]] if qual else list(sources.values()):
                if src.stream is not None:
                    self.used[src.stream] |= set(self.tables[src.stream])
                if src.columns is None or out is None:
                    out = None
                else:
                    out.update(
                        {
                            c: t
                            for c, t in src.columns.items()
                            if c != TIME_COLUMN or src.stream is None or _deduplicated(select)
                        }
                    )
        return out

    def output(self, scope: Scope, stars: ColumnTypes | None) -> ColumnTypes | None:
        """The columns a scope hands to the query around it (a union: its first branch's)."""
        if scope.set_operation_scopes:
            return self.outputs.get(id(scope.set_operation_scopes[0]))
        select = scope.expression
        if not isinstance(select, exp.Select):
            return None
        out: ColumnTypes = {}
        for item in select.expressions:
            if isinstance(item, exp.Star) or (
                isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
            ):
                if stars is None:
                    return None
                out.update(stars)
                continue
            target = item.this if isinstance(item, exp.Alias) else item
            out[item.alias_or_name] = self.types.get(id(target)) or infer(target)
        return out

    def scope(self, scope: Scope) -> None:
        sources = self.sources(scope)
        stars = self.stars(scope, sources)
        for col in [*scope.columns, *_having_columns(scope)]:
            if isinstance(col.this, exp.Star):
                continue
            self.column(col, scope, sources)
        self.outputs[id(scope)] = self.output(scope, stars)


def _having_columns(scope: Scope) -> list[exp.Column]:
    """The unqualified columns of a SELECT's own HAVING, which sqlglot's scope leaves out (they may name an
    output column; :meth:`Resolver.lookup` takes those as they are)."""
    select = scope.expression
    having = select.args.get("having") if isinstance(select, exp.Select) else None
    if having is None:
        return []
    return [c for c in having.find_all(exp.Column) if not c.table and c.find_ancestor(exp.Select) is select]


def _select_aliases(scope: Scope) -> set[str]:
    select = scope.expression
    names = (
        {e.alias for e in select.expressions if isinstance(e, exp.Alias)}
        if isinstance(select, exp.Select)
        else set()
    )
    for lateral in select.find_all(exp.Lateral) if isinstance(select, exp.Select) else ():
        alias = lateral.args.get("alias")
        names |= {c.name for c in alias.columns} if alias is not None else set()
    return names


def resolve(tree: exp.Expr, tables: Mapping[str, Iterable[str] | Mapping[str, str | None]]) -> Resolution:
    """Check every column of ``tree`` against the sources of its own SELECT; return the columns used.

    ``tables``: stream table -> its column names, or -> column -> Spark type text (then nested fields
    and UNNEST are checked against the types). Marks each UNNEST with its kind (see the module's
    docstring). Raises SqlError at the first unknown or ambiguous name.
    """
    resolver = _Resolver(column_types(tables))
    root = None
    for scope in traverse_scope(tree):
        resolver.scope(scope)
        root = scope  # the outermost scope comes last
    out = resolver.outputs.get(id(root)) if root is not None else None
    select = root.expression if root is not None else None
    # an expression without an alias is named by Spark (count(1)), not by its sqlglot name; a star's columns
    # are Spark's too (with rowtime)
    named = isinstance(select, exp.Select) and all(
        isinstance(item, exp.Alias) or (isinstance(item, exp.Column) and not isinstance(item.this, exp.Star))
        for item in select.expressions
    )
    names = list(out) if named and out is not None and all(out) else None
    return Resolution(used=resolver.used, output=names)
