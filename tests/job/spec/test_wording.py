"""Every user input's errors in one wording: what was given and what the field takes (golden table)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from job.spec.wording import field_at, problem, written_as


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    port: int = Field(default=1, ge=0, le=65535)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=5)
    pid: int = Field(gt=0, le=2**31 - 1)
    ratio: float = Field(default=0.5, gt=0)
    deploy: bool = False
    tags: list[str] = Field(default_factory=list, max_length=2)
    inner: Inner = Field(default_factory=Inner)
    url: str = "http://x"

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith("http"):
            raise ValueError(f"{v!r} is not an http(s) URL")
        return v


def _first(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as exc:
        Body.model_validate(data)
    error = exc.value.errors()[0]
    known = {n for n in Body.model_fields} if error["type"] == "extra_forbidden" else ()
    return problem(error, field_at(tuple(error["loc"]), Body), known=known)


OK = {"name": "a", "pid": 1}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"pid": 1}, "is required"),
        ({**OK, "pid": 2**31}, "2147483648 is not a whole number over 0 and up to 2147483647"),
        ({**OK, "pid": -1}, "-1 is not a whole number over 0 and up to 2147483647"),
        ({**OK, "pid": "many"}, '"many" is not a whole number over 0 and up to 2147483647'),
        ({**OK, "pid": 1.5}, "1.5 is not a whole number over 0 and up to 2147483647"),
        ({**OK, "ratio": 0}, "0 is not a number over 0"),
        ({**OK, "name": 5}, "5 is not text"),
        ({**OK, "name": ""}, "must not be empty"),
        ({**OK, "name": "abcdefg"}, "is longer than 5 characters"),
        ({**OK, "deploy": "perhaps"}, '"perhaps" is not true or false'),
        ({**OK, "tags": "a"}, '"a" is not a list'),
        ({**OK, "tags": ["a", "b", "c"]}, "has more than 2 items"),
        ({**OK, "inner": 3}, "3 is not a mapping of names to values"),
        ({**OK, "inner": {"port": 70000}}, "70000 is not a whole number from 0 to 65535"),
        ({**OK, "deplyo": True}, "unknown field; did you mean deploy?"),
        ({**OK, "zzz": True}, "unknown field"),
        ({**OK, "url": "ftp://x"}, "'ftp://x' is not an http(s) URL"),
    ],
)
def test_one_error_in_the_products_words(data: dict[str, Any], message: str) -> None:
    assert _first(data) == message


def test_a_number_is_shown_as_the_file_wrote_it() -> None:
    node = yaml.compose("pid: '007'\nname: 0x1F\nratio: .5\n")
    assert node is not None
    written = {k.value: written_as(v) for k, v in node.value}
    assert written == {"pid": "'007'", "name": "0x1F", "ratio": ".5"}
    with pytest.raises(ValidationError) as exc:
        Body.model_validate({"name": "a", "pid": "007x"})
    error = exc.value.errors()[0]
    assert problem(error, Body.model_fields["pid"], "'007x'") == (
        "'007x' is not a whole number over 0 and up to 2147483647"
    )
