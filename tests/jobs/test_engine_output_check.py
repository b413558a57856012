"""OutputCheck: a regex (whole answer) or a JSON Schema; a one-line reason when the answer fails."""

from __future__ import annotations

import pytest

from batchgate.errors import ConfigError
from batchgate.jobs.checks.output_check import OutputCheck


def test_no_check_is_inactive() -> None:
    assert not OutputCheck().active


def test_regex_must_match_the_whole_stripped_answer() -> None:
    check = OutputCheck(regex="positive|negative")
    assert check.active
    assert check.problem(" positive\n") is None
    assert check.problem("negative") is None
    problem = check.problem("positively neutral")
    assert problem is not None
    assert "does not match" in problem
    assert check.problem(None) == "the answer has no text"


def test_schema_checks_json_answers() -> None:
    check = OutputCheck(
        schema={"type": "object", "required": ["label"], "properties": {"label": {"enum": ["a"]}}}
    )
    assert check.problem('{"label": "a"}') is None
    assert check.problem("not json") == "the answer is not JSON"
    missing = check.problem("{}")
    assert missing is not None
    assert "(root)" in missing
    assert "label" in missing
    wrong = check.problem('{"label": "b"}')
    assert wrong is not None
    assert "at label" in wrong


def test_regex_and_schema_together() -> None:
    check = OutputCheck(regex=r"\{.*\}", schema={"type": "object"})
    assert check.problem("{}") is None
    assert check.problem("[]") is not None


def test_a_broken_schema_or_regex_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"gw.yaml: job.validate_schema: not a valid JSON Schema at type"):
        OutputCheck(schema={"type": 12}, source="gw.yaml")
    with pytest.raises(ConfigError, match=r"gw.yaml: job.validate_regex: invalid regular expression"):
        OutputCheck(regex="(", source="gw.yaml")
