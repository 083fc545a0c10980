"""Every shell block a user would copy from the docs is run here, or marked as needing what the test machine
lacks (tests/docs/blocks.py says how); an unmarked one fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT, SHELL, Block, all_blocks, blocks

SHELL_BLOCKS = [b for b in all_blocks() if b.lang in SHELL]
RUN = [b for b in SHELL_BLOCKS if b.marker == ("shell", "run")]


def test_every_shell_block_is_run_or_says_what_it_needs() -> None:
    bad = [
        b.where
        for b in SHELL_BLOCKS
        if b.marker is None
        or b.marker[0] != "shell"
        or not (b.marker[1] == "run" or (b.marker[1].startswith("needs ") and len(b.marker[1]) > 12))
    ]
    assert bad == []
    assert len(RUN) >= 8 and len(SHELL_BLOCKS) > len(RUN)


def test_no_command_hides_in_a_block_without_a_language() -> None:
    hidden = [
        b.where
        for b in all_blocks()
        if not b.lang
        and any(
            line.lstrip().startswith((".venv/bin/", "daggers ", "$ ", "bash ", "python "))
            for line in b.text.splitlines()
        )
    ]
    assert hidden == []


def test_an_unmarked_block_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# t\n\n<!-- shell: run -->\n```bash\ntrue\n```\n\ntext\n\n```sh\nfalse\n```\n")
    found = blocks(page)
    assert [(b.line, b.lang, b.text, b.marker) for b in found] == [
        (4, "bash", "true", ("shell", "run")),
        (10, "sh", "false", None),
    ]


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_the_block_runs(block: Block, tmp_path: Path) -> None:
    """Run the block with bash -e from the repository root, with this interpreter's venv for ``.venv/bin/``
    and a fresh state folder; it must succeed and print no traceback."""
    script = block.text.replace(".venv/bin/", f"{Path(sys.executable).parent}/")
    env = {**os.environ, "DAGGERS_HOME": str(tmp_path / "state"), "TERM": "dumb", "COLUMNS": "200"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{block.where}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr
    assert done.stdout.strip()
