"""A micro-batch's distinct lookup keys, and each row's place among them: vectorised in Arrow.

A lookup asks for each distinct key once (:func:`distinct_keys`), then every row takes its key's values by
index (:func:`spread`): no Python loop over rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

#: Joins the parts of a key of several columns into one text (a character no key part holds in practice).
_SEPARATOR = "\x1f"


def distinct_keys(table: pa.Table, columns: Sequence[str]) -> tuple[list[tuple[Any, ...]], pa.Array]:
    """Return the distinct keys of ``table``'s ``columns`` (tuples of Python values, in order of first
    appearance) and, for each row, the index of its key in that list (null for a row whose key has a NULL
    part: it is looked up nowhere and gets NULLs)."""
    if len(columns) == 1:
        column = table.column(columns[0]).combine_chunks()
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        unique = pc.drop_null(pc.unique(column))
        index = pc.index_in(column, value_set=unique)
        return [(v,) for v in unique.to_pylist()], index
    parts = [pc.cast(table.column(c), pa.string()) for c in columns]
    composite = pc.binary_join_element_wise(*parts, _SEPARATOR).combine_chunks()  # NULL when a part is NULL
    unique = pc.drop_null(pc.unique(composite))
    index = pc.index_in(composite, value_set=unique)
    first = pc.index_in(unique, value_set=composite)  # the first row of each key
    values = [table.column(c).take(first).to_pylist() for c in columns]
    return list(zip(*values, strict=True)), index


def spread(values: pa.Array, index: pa.Array) -> pa.Array:
    """Return, for each row, the value of its key (``values``: one per distinct key; ``index``: from
    :func:`distinct_keys`); NULL for a row without a key."""
    return pc.take(values, index)
