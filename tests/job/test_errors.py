"""How a DaggerError reads in a dagger's state file (:meth:`job.errors.DaggerError.state_text`)."""

from __future__ import annotations

from job.control.processes import last_error
from job.errors import SinkError, SpecError


def test_the_state_text_is_the_title_the_message_and_the_hint_on_a_line_of_its_own() -> None:
    assert (
        SpecError("a.yaml:3: name: too long").state_text() == "Invalid dagger spec: a.yaml:3: name: too long"
    )
    err = SinkError("cannot reach http://127.0.0.1:1", hint="start InfluxDB")
    assert err.state_text() == f"{SinkError.title}: cannot reach http://127.0.0.1:1\nhint: start InfluxDB"
    # what the controller reads back from a log or state file ending with it
    assert last_error(f"something else\n{err.state_text()}\n") == err.state_text()
