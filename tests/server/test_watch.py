"""What `/metrics` keeps of a server's runs (`server/batch_api/watch.py`): the running ones, the last few
that ended (older ones drop off: the label set stays bounded), and the USD per provider, which
never goes down when a run ends or runs again."""

from __future__ import annotations

from batchgate.jobs.progress.counters import Progress
from batchgate.server.batch_api.watch import RunWatch


def billed(**usd: float) -> Progress:
    p = Progress(started=0.0, total=1)
    for provider, cost in usd.items():
        p.add_cost(provider, cost)
    return p


def test_ended_runs_are_kept_up_to_the_bound_newest_last() -> None:
    watch = RunWatch(kept=3)
    for i in range(5):
        watch.started(f"job_{i}", "normal", billed(alpha=1.0))
        watch.ended(f"job_{i}")
    assert [run.job_id for run in watch.finished] == ["job_2", "job_3", "job_4"]
    assert watch.running == {}


def test_cost_per_provider_adds_ended_and_running_runs_and_only_grows() -> None:
    watch = RunWatch()
    first = billed(alpha=0.5, gamma=0.25)
    watch.started("job_a", "high", first)
    assert watch.cost_by_provider() == {"alpha": 0.5, "gamma": 0.25}
    watch.ended("job_a")
    assert watch.cost_by_provider() == {"alpha": 0.5, "gamma": 0.25}
    again = billed(alpha=0.125)
    watch.started("job_a", "high", again)  # retried: a new run of the same job
    assert [run.job_id for run in watch.finished] == []  # its earlier run's figures go
    assert watch.cost_by_provider() == {"alpha": 0.625, "gamma": 0.25}
    watch.ended("job_a")
    watch.ended("job_a")  # a second end of the same run adds nothing
    assert watch.cost_by_provider() == {"alpha": 0.625, "gamma": 0.25}
    assert [(r.job_id, r.priority) for r in watch.finished] == [("job_a", "high")]
