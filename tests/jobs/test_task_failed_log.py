"""A task failed for good is logged once, by one function (`outcome.log_failed`), with the same
fields whichever way it failed: live (the engine) or in a provider's batch (`failure_outcome`).
The two paths used to build the event each by hand, the live one without its `mode`."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from batchgate.emulator import Emulator
from batchgate.jobs.batch.outcomes import failure_outcome
from batchgate.jobs.store.protocol import TaskState

from .test_engine import _config, _emulator, _engine, _spec, _store

FIELDS = {"task", "seq", "error", "status", "provider", "attempts", "mode"}  # and what `bind` adds


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with _emulator() as server:
        yield server


def _failed(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    records = [r for r in caplog.records if r.getMessage() == "task_failed"]
    return [dict(getattr(r, "fields")) for r in records]  # noqa: B009 — set by `logs.event`


async def test_a_live_task_failed_for_good_is_logged_once(
    emu: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="batchgate.task")
    store = await _store([_spec(0, "wonderful"), _spec(1, "blue")])  # c1's answers fail the check
    config = _config(job={"validate_regex": "positive|negative", "validation_attempts": 2})
    await _engine(store, emu, config).run()
    states = {r.custom_id: r.state async for r in store.iter_results("job1", ordered=True)}
    assert states == {"c0": TaskState.SUCCEEDED, "c1": TaskState.FAILED}
    [fields] = _failed(caplog)
    assert fields.keys() >= FIELDS
    assert (fields["task"], fields["error"], fields["mode"]) == ("c1", "invalid_output", "live")


def test_a_batch_task_failed_for_good_is_logged_once_with_the_same_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="batchgate.task")
    done = failure_outcome(_spec(3), "expired", "the batch expired", None, "alpha", 1)
    assert done.state is TaskState.FAILED
    [fields] = _failed(caplog)
    assert fields.keys() >= FIELDS
    assert (fields["task"], fields["error"], fields["mode"]) == ("c3", "expired", "batch")
