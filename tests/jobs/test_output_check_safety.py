"""An output check is its owner's data (a tenant's, under `batchgate serve`; a config file's in a
local run, which gets the same refusals): a schema reaches nothing outside itself, a reference
must land on a schema, and a pattern that backtracks fails the answer at the time limit instead
of holding the process."""

from __future__ import annotations

import pytest

from batchgate.errors import ConfigError
from batchgate.jobs.checks.output_check import TIMED_OUT, OutputCheck


@pytest.mark.parametrize(
    "ref", ["file:///etc/hostname", "http://127.0.0.1:9/s.json", "other.json", "//host/x"]
)
def test_a_ref_outside_the_schema_is_a_config_error_saying_nothing_is_fetched(ref: str) -> None:
    with pytest.raises(ConfigError) as caught:
        OutputCheck(schema={"properties": {"a": {"$ref": ref}}}, source="gateway.yaml")
    assert caught.value.key == "job.validate_schema"
    assert "/properties/a/$ref" in caught.value.message
    assert "nothing is fetched" in caught.value.message


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ({"x-data": {"v": ["SECRET-1"]}, "$ref": "#/x-data/v"}, "points to a list, not a schema"),
        ({"x-data": {"v": "SECRET-2"}, "$ref": "#/x-data/v"}, "points to a str, not a schema"),
        ({"$ref": "#/$defs/missing"}, "points to nothing"),
        ({"x-data": {"type": 5}, "$ref": "#/x-data"}, "points to an invalid schema"),
        ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "without end"),
        ({"allOf": [{"$ref": "#"}]}, "without end"),
    ],
)
def test_a_ref_must_land_on_a_valid_schema_and_is_never_quoted(schema: dict[str, object], said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        OutputCheck(schema=schema)
    assert said in caught.value.message
    assert "SECRET" not in caught.value.message


def test_local_refs_and_anchors_still_check_answers() -> None:
    check = OutputCheck(
        schema={
            "$defs": {"n": {"type": "integer"}, "s": {"$anchor": "text", "type": "string"}},
            "properties": {"n": {"$ref": "#/$defs/n"}, "s": {"$ref": "#text"}},
        }
    )
    assert check.problem('{"n": 1, "s": "x"}') is None
    assert check.problem('{"n": "1"}') is not None
    assert check.problem('{"s": 2}') is not None


@pytest.mark.parametrize(
    ("schema", "answer"),
    [
        ({"properties": {"s": {"type": "string", "pattern": "^(a|aa)+$"}}}, '{"s": "' + "a" * 64 + 'b"}'),
        ({"patternProperties": {"^(a|aa)+$": {}}, "additionalProperties": False}, '{"' + "a" * 64 + 'b": 1}'),
    ],
    ids=["pattern", "patternProperties"],
)
@pytest.mark.slow
async def test_a_backtracking_schema_pattern_fails_the_answer_at_the_time_limit(
    schema: dict[str, object], answer: str
) -> None:
    assert await OutputCheck(schema=schema).acheck(answer) == TIMED_OUT


@pytest.mark.slow
async def test_a_backtracking_regex_fails_the_answer_at_the_time_limit() -> None:
    check = OutputCheck(regex="(a|aa)+")
    assert await check.acheck("a" * 64 + "b") == TIMED_OUT
    assert await check.acheck("aaa") is None
