"""Text from users shown as text: a name, a comment, a description or an error that quotes one reaches a
terminal without its control characters.

A version comment holding ``ESC[2J`` cleared the screen of whoever ran ``daggers dagger history``; an
OSC-8 sequence made a link that showed one address and opened another. :func:`safe_text` writes every
character a terminal would act on as a visible escape (``\\x1b``, ``\\r``, ``\\u202e``), so the text is
shown, never obeyed. Rich markup (``[bold]``, ``[link=…]``) is the printers' part: they show user text as
``rich.text.Text`` or through ``rich.markup.escape``.
"""

from __future__ import annotations

import re

#: What a terminal acts on: C0 controls, DEL, C1 controls (0x80-0x9f, CSI and OSC among them), the line and
#: paragraph separators, and the bidirectional marks, embeddings, overrides and isolates that reorder a line.
_OTHERS = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_ANY = re.compile(f"[\x00-\x1f{_OTHERS}]")
_BUT_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHERS}]")  # keeps tab (0x09) and newline (0x0a)
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str | None, *, multiline: bool = False) -> str:
    """Return ``text`` with every character a terminal would act on written as a visible escape: ESC as
    ``\\x1b``, CR as ``\\r``, a C1 control as ``\\x9b``, a bidirectional override as ``\\u202e``.

    Printable text comes back unchanged (a backslash too). ``multiline`` keeps newlines and tabs, for a
    field shown on several lines (a spec, a diff, an error message); otherwise they are escaped as well.
    ``None`` gives ``""``."""
    if not text:
        return ""
    return (_BUT_LINES if multiline else _ANY).sub(_escape, text)
