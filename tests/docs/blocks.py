"""The fenced blocks of the documentation, with the marker comment that says how each is tested.

A block's marker is an HTML comment on the last non-blank line before its opening fence (invisible on GitHub
and on the site):

- ``<!-- shell: run -->``: a shell block the tests run (tests/docs/test_shell_blocks.py);
- ``<!-- shell: needs WHAT -->``: a shell block that needs what the test machine lacks (a fresh machine, a
  running stack, minutes of Spark, a server that runs until stopped); WHAT says which;
- ``<!-- check: spec -->``: a whole dagger spec, validated as ``daggers sql check`` does;
- ``<!-- check: spec-patch -->``: top-level spec fields laid over ``examples/bookings-per-s2.yaml``, then
  validated the same way;
- ``<!-- check: sql SPEC -->``: a query put in the ``sql`` of the spec file SPEC, then validated;
- ``<!-- check: alerts -->``: an alerting configuration, validated as ``daggers alerts check`` does;
- ``<!-- check: chaos -->``: a chaos experiment, validated as ``daggers chaos run`` reads it;
- ``<!-- check: skip WHY -->``: a fragment that cannot stand alone; WHY says where it is tested.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Shell languages a user copies from.
SHELL = frozenset({"bash", "sh", "shell", "console", "zsh"})
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<lang>[\w+-]*)")
_MARKER = re.compile(r"^\s*<!--\s*(?P<kind>shell|check):\s*(?P<what>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its marker (kind, what), if any."""

    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marker: tuple[str, str] | None

    @property
    def where(self) -> str:
        """Return ``file:line`` relative to the repository."""
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """Return the Markdown a user reads: README.md, BENCHMARKS.md, the examples' READMEs and every page under
    docs/ (not the chaos tool's generated reports)."""
    found = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "examples").rglob("*.md"))]
    found += sorted(
        p for p in (ROOT / "docs").rglob("*.md") if "chaos" not in p.relative_to(ROOT / "docs").parts
    )
    return found


def blocks(path: Path) -> list[Block]:
    """Return the fenced blocks of one Markdown file, in order."""
    lines = path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m.group("fence"), len(m.group("indent"))
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = _MARKER.match(lines[k]) if k >= 0 else None
        body = "\n".join(line[indent:] for line in lines[i + 1 : j])
        out.append(
            Block(
                path,
                i + 1,
                m.group("lang").lower(),
                body,
                (marker.group("kind"), marker.group("what")) if marker else None,
            )
        )
        i = j + 1
    return out


def all_blocks() -> list[Block]:
    """Return every fenced block of every page."""
    return [b for p in pages() for b in blocks(p)]
