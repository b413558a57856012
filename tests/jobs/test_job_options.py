"""What a job remembers (`JobOptions`) and its spec (`JobSpec`): one JSON object read once; rows an
older batchgate wrote (its `mode`, `deadline_hours` and `priority` at the top, options it no
longer knows) read the same; a run's door options replace only those they name; the one parser's
limits hold for every door (a tenant's far-future date refused, not shown as year 10000)."""

from __future__ import annotations

import orjson
import pytest

from batchgate.config import JobSpec, parse_job_spec
from batchgate.errors import JobSpecError
from batchgate.jobs.store.options import JobOptions


def test_a_row_an_older_version_wrote_reads_into_the_typed_options() -> None:
    old = {
        "ordered": True,
        "skip_invalid": False,
        "errors_path": "/data/out.errors.jsonl",
        "skipped_lines": 2,
        "skipped_first": [{"line": 3, "reason": "not JSON"}],
        "mode": "batch-api",
        "deadline_hours": 12,
        "priority": "high",
        "price_notes": {"gpt-4o-mini": "built-in table of 2026-11-01"},
        "workers": True,
        "api_id": "batch_abc",
        "something_newer": 1,  # a key this version does not know is left alone
    }
    options = JobOptions.of_json(orjson.dumps(old))
    assert (options.spec.mode, options.spec.deadline_hours, options.spec.priority) == (
        "batch-api",
        12,
        "high",
    )
    assert (options.ordered, options.workers, options.api_id, options.skipped_lines) == (
        True, True, "batch_abc", 2,
    )  # fmt: skip
    assert options.skipped_first == ({"line": 3, "reason": "not JSON"},)
    assert JobOptions.of_json(options.to_json()) == options  # written and read back unchanged


def test_door_options_replace_only_those_they_name() -> None:
    stored = JobSpec(name="nightly", priority="high", metadata={"team": "search"}, deadline_hours=4)
    again = JobSpec(priority="low", deadline=2_000_000_000.0)
    merged = again.over(stored)
    assert (merged.name, merged.priority, dict(merged.metadata)) == ("nightly", "low", {"team": "search"})
    assert (merged.deadline, merged.deadline_hours) == (2_000_000_000.0, None)  # one deadline form wins
    assert merged.hours_after(2_000_000_000.0 - 7200) == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        ({"not_before": "9999-12-31T23:59:59-14:00"}, "not_before", "before 2200-01-01T00:00:00Z"),
        ({"not_before": "2026-12-02T10:00:00"}, "not_before", "needs an offset"),
        ({"deadline": {"hours": 0}}, "deadline", "hours above 0"),
        ({"deadline": "2020-01-01T00:00:00Z"}, "deadline", "the deadline has passed"),
        ({"metadata": {str(i): "v" for i in range(17)}}, "metadata", "at most 16"),
        ({"metadata": {"k": "v" * 513}}, "metadata", "values of at most 512"),
        ({"name": ""}, "name", "non-empty string"),
        ({"retry_failed": -1}, "retry_failed", "from 0 to 100"),
        ({"callback_secret_env": "NOT A NAME"}, "callback_secret_env", "environment variable"),
        ({"priority": "urgent"}, "priority", "expected one of high, normal, low; got 'urgent'"),
        ({"colour": "red"}, "colour", "unknown field"),
    ],
)
def test_every_door_gets_the_same_refusal(data: dict[str, object], field: str, reason: str) -> None:
    with pytest.raises(JobSpecError) as info:
        parse_job_spec(data, now=1_900_000_000.0)
    assert info.value.field == field
    assert reason in info.value.reason
    assert str(info.value) == f"{field}: {info.value.reason}"


def test_a_deadline_in_hours_is_a_time_once_the_job_is_created() -> None:
    assert parse_job_spec({"deadline": {"hours": 2}}).deadline_hours == 2  # a config: from creation
    assert parse_job_spec({"deadline": {"hours": 2}}, now=1000.0).deadline == 1000.0 + 7200  # an API call
