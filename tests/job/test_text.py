"""job.common.text.safe_text: what a terminal would act on is shown as an escape, printable text is left as it is."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from job.common.text import safe_text

#: C0, DEL, C1, the line and paragraph separators, and the bidirectional controls (written out again here, not
#: imported: the test is a second reading of the rule).
ACTED_ON = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
OSC8 = "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\"


@given(st.text())
def test_nothing_a_terminal_acts_on_comes_out(text: str) -> None:
    assert ACTED_ON.search(safe_text(text)) is None


@given(st.text())
def test_on_several_lines_only_newlines_and_tabs_stay(text: str) -> None:
    shown = safe_text(text, multiline=True)
    assert {ch for ch in shown if ACTED_ON.match(ch)} <= {"\n", "\t"}
    assert shown.count("\n") == text.count("\n") and shown.count("\t") == text.count("\t")


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_printable_ascii_is_unchanged(text: str) -> None:
    assert safe_text(text) == text
    assert safe_text(text, multiline=True) == text


@given(
    st.text(
        alphabet=st.characters(
            blacklist_categories=("Cc", "Cs"),
            blacklist_characters="\u061c\u200e\u200f"
            "\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069",
        )
    )
)
def test_other_text_is_unchanged(text: str) -> None:
    assert safe_text(text) == text


@given(st.text())
def test_twice_is_once(text: str) -> None:
    assert safe_text(safe_text(text)) == safe_text(text)


def test_escapes_read_as_what_they_stand_for() -> None:
    assert safe_text("\x1b[2J") == "\\x1b[2J"
    assert safe_text("\x1b[31mred") == "\\x1b[31mred"
    assert safe_text("[bold red]x[/]") == "[bold red]x[/]"  # markup is the printers' part
    assert safe_text(OSC8) == "\\x1b]8;;http://evil\\x1b\\click\\x1b]8;;\\x1b\\"
    assert safe_text("a\r\nb\tc\x00\x7f\x9b\u202egnp.exe") == "a\\r\\nb\\tc\\x00\\x7f\\x9b\\u202egnp.exe"
    assert safe_text("line 1\r\nline 2\tx", multiline=True) == "line 1\\r\nline 2\tx"
    assert safe_text("naïve café ✓ 日本") == "naïve café ✓ 日本"
    assert safe_text(None) == "" and safe_text("") == ""
