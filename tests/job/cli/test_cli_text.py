"""Text from users reaches other users' terminals as text: the real ``daggers`` command over a SQLite registry
prints an editor's version comment, a token's description, a data centre's description and a dagger's last
error with no control sequence of theirs and no Rich markup read (issue 49, item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from job.control import ControlPlane, Registry
from job.control.models import Dagger, DaggerStatus
from tests.job.control.control_seed import bookings_spec, seed

DAGGERS = Path(sys.executable).with_name("daggers")
#: Clear the screen, turn red, Rich markup, a hyperlink (OSC 8) that shows "click" and opens another address.
EVIL = (
    "\x1b[2J \x1b[31mred [bold red]x[/] \x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\ [link=http://e]l[/link]"
)
SHOWN = "\\x1b[2J \\x1b[31mred [bold red]x[/] \\x1b]8;;http://evil\\x1b\\click\\x1b]8;;\\x1b\\ [link=http://e]l[/link]"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """team-a's editor alice made pg-var with EVIL as the comment of both versions, a superuser gave alice a token
    described as EVIL and a data centre described so; pg-var's last error quotes EVIL (as a bad record's value)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('cli-text') / 'registry.db'}"
    registry = Registry(url)
    root = seed(registry)
    alice = ControlPlane(registry, "alice")
    alice.create("a-jkt", bookings_spec("pg-var"), comment=EVIL)
    alice.edit(
        "pg-var",
        bookings_spec("pg-var").replace("trigger_interval_s: 1", "trigger_interval_s: 2"),
        comment=EVIL,
    )
    root.create_token("alice", description=EVIL)
    root.add_datacentre("evil", EVIL)
    with registry.session() as s:
        dagger_id = s.scalars(select(Dagger.id).where(Dagger.name == "pg-var")).one()
        status = s.get(DaggerStatus, dagger_id)
        assert status is not None
        status.last_error = f"Sink error: a bad value {EVIL}\nsecond line"
    registry.close()
    return url


def daggers(url: str, user: str, *args: str, terminal: bool = False) -> subprocess.CompletedProcess[bytes]:
    """Run the installed ``daggers`` as ``user``: to a pipe, or as to a 300-column colour terminal."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FORCE_COLOR", "NO_COLOR", "COLUMNS", "DAGGERS_SERVER")
    }
    if terminal:
        env.update(FORCE_COLOR="1", COLUMNS="300")
    return subprocess.run(
        [str(DAGGERS), *args, "--registry", url, "--user", user], capture_output=True, env=env, timeout=120
    )


def test_history_shows_a_comment_as_text_to_a_pipe(url: str) -> None:
    done = daggers(url, "vera", "dagger", "history", "pg-var")  # a viewer reads an editor's comment
    assert done.returncode == 0, done.stderr
    assert b"\x1b" not in done.stdout and b"\x9b" not in done.stdout
    rows = [line for line in done.stdout.decode().splitlines() if "alice" in line]
    assert len(rows) == 2 and all(f"│ {SHOWN} │" in row for row in rows), rows


def test_history_shows_a_comment_as_text_to_a_terminal(url: str) -> None:
    done = daggers(url, "vera", "dagger", "history", "pg-var", terminal=True)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert "\x1b[1m" in out  # Rich's own styles are there: this is a colour terminal
    assert "\x1b[2J" not in out and "\x1b[31m" not in out and "\x1b]8" not in out  # none of the comment's
    assert out.count(SHOWN) == 2  # markup shown as written, not read


def test_token_list_shows_a_description_as_text(url: str) -> None:
    for terminal in (False, True):
        done = daggers(url, "root", "token", "list", terminal=terminal)
        assert done.returncode == 0, done.stderr
        out = done.stdout.decode()
        assert out.count(SHOWN) == 1 and "\x1b[2J" not in out and "\x1b]8" not in out
        if not terminal:
            assert "\x1b" not in out


def test_datacentre_list_shows_a_description_as_text(url: str) -> None:
    done = daggers(url, "root", "dc", "list")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines()[0] == f"evil  {SHOWN}"


def test_show_prints_the_last_error_as_text(url: str) -> None:
    done = daggers(url, "alice", "dagger", "show", "pg-var", terminal=True)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert "\x1b[2J" not in out and "\x1b]8" not in out and "\x1b[31mred" not in out
    assert f"Sink error: a bad value {SHOWN}\nsecond line" in out


def test_audit_details_and_an_error_quoting_input_are_text(url: str) -> None:
    refused = daggers(url, "bob", "dagger", "stop", f"team-a/{EVIL}")
    assert refused.returncode == 2 and b"\x1b" not in refused.stderr
    assert f"no dagger {'team-a/' + EVIL!r} in your teams" in refused.stderr.decode()  # markup as written
    assert daggers(url, "vera", "dagger", "stop", "pg-var").returncode == 2  # a viewer: refused, audited
    done = daggers(url, "root", "audit", "--limit", "50")
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert "\x1b" not in out
    edit = next(line for line in out.splitlines() if "│ edit " in line)
    assert edit.endswith('"comment": "\\u001b[2J │')  # the JSON of the edit's details, cut at 80
    denied = next(line for line in out.splitlines() if "│ vera " in line)
    assert "│ DENIED  │" in denied
