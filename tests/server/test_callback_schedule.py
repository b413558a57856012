"""The callbacks' outbox and timer on a fake clock, without a network: an end event is written in
the transaction that records the end (or not at all), arms one timer for its first attempt, and
each failed attempt pushes it by the growing retry schedule until the event is given up."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest

from batchgate.clock import FakeClock
from batchgate.server.callbacks.delivery import DEFAULT_DELAYS, Callbacks, CallbackSettings
from batchgate.server.callbacks.outbox import Event
from batchgate.server.tenancy.registry import Registry
from batchgate.webhooks.sender import Delivery

URL = "https://hooks.example.com/batch"


def _record(hooks: Callbacks, registry: Registry, batch_id: str, status: str = "completed") -> Event | None:
    with registry.transaction() as conn:
        event = hooks.record_end(conn, batch_id, "key-1", URL, status, ended_at=1_700_000_000)
    hooks.wake()
    return event


def _fail_after_recording(hooks: Callbacks, registry: Registry) -> None:
    with registry.transaction() as conn:
        hooks.record_end(conn, "batch_2", "key-1", URL, "failed", ended_at=1)
        raise RuntimeError("the end could not be recorded")


async def test_failed_attempts_move_the_one_timer_by_the_schedule_until_given_up(tmp_path: Path) -> None:
    clock, registry = FakeClock(), Registry(tmp_path / "server.db")
    hooks = Callbacks(registry, clock, CallbackSettings(delays=(5.0, 30.0), give_up_after_s=100.0))
    try:
        hooks.start()
        assert clock.next_deadline() is None  # nothing pending: no timer at all
        event = _record(hooks, registry, "batch_1")
        assert event is not None
        assert orjson.loads(event.body) == {
            "id": event.id, "object": "event", "created_at": 1_700_000_000, "type": "batch.completed",
            "data": {"id": "batch_1"},
        }  # fmt: skip
        assert clock.next_deadline() == clock.now()
        waits = []
        for _ in range(3):
            pending = hooks.outbox.get(event.id)
            assert pending is not None
            hooks._settle(pending, Delivery("http_error", "answered HTTP 500"))
            hooks.wake()
            deadline = clock.next_deadline()
            assert deadline is not None
            waits.append(deadline - clock.now())
        assert waits == [5.0, 30.0, 30.0]  # the last delay repeats
        late = hooks.outbox.get(event.id)
        assert late is not None
        hooks._settle(
            dataclasses.replace(late, created_at=clock.wall() - 101), Delivery("unreachable", "no answer")
        )
        hooks.wake()
        final = hooks.outbox.get(event.id)
        assert final is not None
        assert (final.state, final.attempts, final.last_error) == ("failed", 4, "no answer")
        assert clock.next_deadline() is None
        assert hooks.counts == {"http_error": 3, "unreachable": 1}
    finally:
        await hooks.close()
        registry.close()


async def test_an_end_event_commits_with_the_end_or_not_at_all(tmp_path: Path) -> None:
    clock, registry = FakeClock(), Registry(tmp_path / "server.db")
    hooks = Callbacks(registry, clock)
    try:
        with pytest.raises(RuntimeError):
            _fail_after_recording(hooks, registry)
        assert hooks.outbox.of_object("batch_2") == []
        assert _record(hooks, registry, "batch_3", status="in_progress") is None  # not an end
        assert hooks.outbox.of_object("batch_3") == []
        for status in ("failed", "cancelled", "expired"):
            event = _record(hooks, registry, f"batch_{status}", status)
            assert event is not None
            assert orjson.loads(event.body)["type"] == f"batch.{status}"
    finally:
        await hooks.close()
        registry.close()


def test_the_default_schedule_grows_and_is_capped() -> None:
    settings = CallbackSettings()
    waits = [settings.delay(n) for n in range(1, 10)]
    assert waits[: len(DEFAULT_DELAYS)] == list(DEFAULT_DELAYS)
    assert waits == sorted(waits)
    assert set(waits[len(DEFAULT_DELAYS) - 1 :]) == {3600.0}
