"""The ETA: from the recent pace of the step that binds (not the average since the start), never
from a pipeline's growing stored total, and `stalled` when nothing ends — on a fake clock (the
times are passed in; nothing sleeps)."""

from __future__ import annotations

from batchgate.config import config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.jobs.engine import JobEngine
from batchgate.jobs.engine_types import JobFacts
from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.progress.eta import Eta
from batchgate.jobs.progress.live_display import eta_text, total_text
from batchgate.jobs.progress.snapshot import snapshot
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import TaskOutcome, TaskSpec, TaskState

from .factories import job


def _ended(progress: Progress, step: str | None, n: int) -> None:
    for _ in range(n):
        progress.record(TaskOutcome(0, TaskState.SUCCEEDED, 1, b"{}", None, "alpha"), step)


def test_the_eta_follows_the_recent_pace_not_the_average_since_the_start() -> None:
    eta = Eta(window_s=60.0)
    ended = 0
    for t in range(61):  # 10 a second for a minute
        ended = 10 * t
        eta.observe(float(t), {"": ended}, {"": 2000 - ended})
    for t in range(61, 181):  # then the provider slows to 1 a second
        ended += 1
        view = eta.observe(float(t), {"": ended}, {"": 2000 - ended})
    assert ended == 720
    assert view.seconds == 1280.0  # 1,280 left at 1/s (the since-start average, 4/s, says 320 s)
    assert view.binding is None
    assert view.stalled_s is None


def test_a_pipeline_s_eta_comes_from_the_step_that_binds() -> None:
    eta = Eta(window_s=30.0)
    for t in range(31):
        view = eta.observe(
            float(t), {"extract": 8 * t, "summary": 2 * t}, {"extract": 0, "summary": 400 - 2 * t}
        )
    assert view.binding == "summary"
    assert view.seconds == 170.0  # summary's 340 left at 2/s; extract is done


def test_a_step_without_a_pace_of_its_own_takes_the_run_s() -> None:
    eta = Eta(window_s=10.0)
    for t in range(11):
        view = eta.observe(float(t), {"a": 5 * t}, {"a": 100 - 5 * t, "b": 100})
    assert view.binding == "b"
    assert view.seconds == 20.0  # b's 100 at the run's 5/s


def test_nothing_ending_for_a_while_is_stalled_and_a_new_end_clears_it() -> None:
    eta = Eta(window_s=60.0, stall_after_s=30.0)
    eta.observe(0.0, {"": 0}, {"": 100})
    eta.observe(10.0, {"": 10}, {"": 90})
    view = eta.observe(39.0, {"": 10}, {"": 90})
    assert view.stalled_s is None  # 29 s without an end: not yet
    assert view.seconds is not None
    view = eta.observe(55.0, {"": 10}, {"": 90})
    assert view.stalled_s == 45.0
    assert view.seconds is None
    view = eta.observe(56.0, {"": 11}, {"": 89})
    assert view.stalled_s is None
    assert view.seconds is not None


def test_nothing_ending_from_the_start_is_stalled_too() -> None:
    eta = Eta(stall_after_s=30.0)
    assert eta.observe(0.0, {}, {"": 2000}).seconds is None  # no pace yet: unknown, not zero
    view = eta.observe(31.0, {}, {"": 2000})
    assert view.stalled_s == 31.0


def test_a_pipeline_s_eta_does_not_move_as_later_steps_are_stored() -> None:
    progress = Progress(started=0.0, total=100)
    progress.expect_steps({"extract": 100, "summary": 100})
    _ended(progress, "extract", 10)
    progress.total += 10  # the ten follow-up tasks are stored
    progress.eta_view(0.0)
    _ended(progress, "extract", 10)
    first = progress.eta_view(10.0)
    progress.total += 10  # stored total grows; the steps' sizes do not
    again = progress.eta_view(10.0)
    assert first.seconds == again.seconds
    assert first.binding == "summary"
    assert progress.total_growing


def test_the_snapshot_and_the_displays_say_stalled_and_growing() -> None:
    progress = Progress(started=0.0, total=50)
    progress.expect_steps({"a": 50, "b": 50})
    progress.eta_view(0.0)
    snap = snapshot("job1", progress, None, 45.0, 1000.0)
    assert snap["stalled_s"] == 45.0
    assert snap["eta_s"] is None
    assert eta_text(snap) == "stalled 45s"
    assert total_text(snap) == "50+"
    _ended(progress, "a", 5)
    snap = snapshot("job1", progress, None, 46.0, 1000.0)
    assert snap["stalled_s"] is None
    assert snap["eta_step"] == "b"
    assert eta_text(snap).endswith(" (b)")


def test_a_run_of_slow_requests_is_not_called_stalled_between_its_ends() -> None:
    eta = Eta(window_s=600.0, stall_after_s=30.0)
    eta.observe(0.0, {"": 0}, {"": 10})
    eta.observe(40.0, {"": 1}, {"": 9})  # one answer every 40 s
    eta.observe(80.0, {"": 2}, {"": 8})
    assert eta.observe(119.0, {"": 2}, {"": 8}).stalled_s is None  # 39 s: its usual wait
    assert eta.observe(199.0, {"": 2}, {"": 8}).stalled_s is None  # under 3 x 40 s
    assert eta.observe(201.0, {"": 2}, {"": 8}).stalled_s == 121.0


class _Steps:
    """A graph of two steps over 3 items that adds no follow-up (enough for the engine's ETA)."""

    def after(self, spec: TaskSpec, outcome: TaskOutcome) -> list[TaskSpec]:
        return []

    def step_sizes(self) -> dict[str, int]:
        return {"extract": 3, "summary": 3}


async def test_the_engine_counts_each_step_s_ends_for_the_eta() -> None:
    provider = {"name": "alpha", "family": "openai", "limits": {"rpm": 10**6, "tpm": 10**8}}
    async with Emulator(emulator_config_from_dict({"seed": 5, "providers": [provider]})) as emu:
        data = {
            "providers": [{"name": "alpha", "kind": "openai", "base_url": emu.base_url("alpha")}],
            "routes": [{"model": "m", "targets": ["alpha:gpt-4o-mini"]}],
        }
        store = MemoryJobStore()
        await store.create_job(job(task_total=3))
        body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        specs = [
            TaskSpec(seq=i, line_no=i + 1, custom_id=f"c{i}", body=body, step="extract") for i in range(3)
        ]
        await store.add_tasks("job1", specs)
        engine = JobEngine(
            config_from_dict(data, source="t.yaml"), store, "job1", job=JobFacts(follow=_Steps())
        )
        outcome = await engine.run()
    assert outcome.status == "completed"
    assert outcome.progress.step_sizes == {"extract": 3, "summary": 3}
    assert outcome.progress.ended_by_step == {"extract": 3}  # the summaries are what is left
