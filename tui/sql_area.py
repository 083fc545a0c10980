"""A TextArea that highlights Dagger SQL with Pygments (no tree-sitter needed) and underlines an error.

Textual's built-in highlighting needs tree-sitter grammars; this widget fills the same highlight map
from Pygments' SQL lexer instead: keywords, functions (a name followed by ``(``), strings, numbers,
comments and operators, plus the word at the validation error's line and column.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from pygments.lexers.sql import SqlLexer
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text, _TokenType
from rich.style import Style
from textual.widgets import TextArea
from textual.widgets.text_area import TextAreaTheme

Highlights = dict[int, list[tuple[int, int | None, str]]]
THEME_NAME = "daggers-sql"
_LEXER = SqlLexer()
_NOT_CALLS = {"IN", "EXISTS", "VALUES", "AS", "ON", "OVER", "USING", "AND", "OR", "NOT", "FROM", "JOIN"}


def _name(token: _TokenType) -> str | None:
    for kind, name in (
        (Keyword, "keyword"),
        (Name.Builtin, "function"),
        (Name.Function, "function"),
        (String, "string"),
        (Number, "number"),
        (Comment, "comment"),
        (Operator, "operator"),
    ):
        if token in kind:
            return name
    return None


def sql_highlights(text: str) -> Highlights:
    """Return the highlight map of ``text``: line → [(start byte, end byte or None, highlight name)]."""
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    lines = text.split("\n")
    tokens = [t for t in _LEXER.get_tokens_unprocessed(text) if t[1] not in Text.Whitespace and t[2].strip()]
    out: Highlights = defaultdict(list)
    for n, (index, token, value) in enumerate(tokens):
        name = _name(token)
        nxt = tokens[n + 1] if n + 1 < len(tokens) else None
        calls = token in Name or (token in Keyword and value.upper() not in _NOT_CALLS)
        if calls and nxt is not None and nxt[1] in Punctuation and nxt[2] == "(":
            name = "function"
        if name is None:
            continue
        end = index + len(value)
        row = bisect.bisect_right(starts, index) - 1
        while index < end and row < len(lines):
            line_start = starts[row]
            line = lines[row]
            a, b = index - line_start, min(end - line_start, len(line))
            out[row].append((len(line[:a].encode()), len(line[:b].encode()), name))
            row += 1
            index = starts[row] if row < len(starts) else end
    return out


def _theme() -> TextAreaTheme:
    base = TextAreaTheme.get_builtin_theme("css")
    styles = dict(base.syntax_styles) if base else {}
    styles["error"] = Style(color="red", bold=True, underline=True)
    return TextAreaTheme(name=THEME_NAME, syntax_styles=styles)


class SqlArea(TextArea):
    """A SQL editor: Pygments highlighting, line numbers, and :attr:`error_at` underlined in red."""

    def __init__(self, text: str = "", **kwargs: Any) -> None:
        self._error_at: tuple[int, int] | None = None
        super().__init__(text, show_line_numbers=True, tab_behavior="indent", soft_wrap=False, **kwargs)
        self.register_theme(_theme())
        self.theme = THEME_NAME

    @property
    def error_at(self) -> tuple[int, int] | None:
        """The (line, column), 1-based, of the error to underline, or None."""
        return self._error_at

    @error_at.setter
    def error_at(self, where: tuple[int, int] | None) -> None:
        if where != self._error_at:
            self._error_at = where
            self._build_highlight_map()
            self.refresh()

    def _build_highlight_map(self) -> None:
        """Fill Textual's highlight map from Pygments (overrides the tree-sitter query)."""
        self._line_cache.clear()
        self._highlights.clear()
        self._highlights.update(sql_highlights(self.document.text))
        where = getattr(self, "_error_at", None)
        if where is not None:
            row, col = where[0] - 1, max(where[1] - 1, 0)
            line = self.document.text.split("\n")[row] if 0 <= row < self.document.line_count else ""
            end = col
            while end < len(line) and (line[end].isalnum() or line[end] in "_`"):
                end += 1
            end = max(end, min(col + 1, len(line)))
            self._highlights[row].append((len(line[:col].encode()), len(line[:end].encode()), "error"))
