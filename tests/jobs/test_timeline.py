"""The job timeline's sampler: cumulative columns, a provider first seen mid-run, the bound
(every other sample dropped, the interval doubled) and a resumed run continuing the stored one."""

from __future__ import annotations

from batchgate.jobs.progress import timeline as tl
from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.progress.timeline import Timeline, empty_timeline, load_timeline


def _progress(done: int = 0, failed: int = 0) -> Progress:
    p = Progress(started=0.0, total=100)
    p.succeeded, p.failed = done, failed
    return p


def test_samples_are_cumulative_and_a_late_provider_is_padded() -> None:
    t = Timeline(every_s=2.0)
    p = _progress()
    assert t.due(0.0)
    t.take(0.0, 1000.0, p)
    assert not t.due(1.0)
    assert t.due(2.0)
    p.succeeded, p.failed = 3, 1
    tally = p.tally("alpha")
    tally.attempts, tally.answered, tally.rate_limited, tally.latency_ms = 5, 3, 1, 250.0
    t.take(2.0, 1002.0, p)
    d = load_timeline(t.dump())
    assert d["t"] == [1000.0, 1002.0]
    assert d["done"] == [0, 4]
    assert d["failed"] == [0, 1]
    alpha = d["providers"]["alpha"]
    assert alpha == {
        "attempts": [0, 5], "answered": [0, 3], "rate_limited": [0, 1], "errors": [0, 0],
        "latency_ms": [0, 250.0],
    }  # fmt: skip


def test_the_bound_halves_the_samples_and_doubles_the_interval() -> None:
    t = Timeline(every_s=1.0)
    p = _progress()
    for i in range(tl.MAX_SAMPLES + 1):
        p.succeeded = i
        t.take(float(i), float(i), p)
    d = t.data
    assert len(d["t"]) <= tl.MAX_SAMPLES // 2 + 1
    assert d["t"][-1] == float(tl.MAX_SAMPLES)
    assert d["done"][-1] == tl.MAX_SAMPLES
    assert d["every_s"] == 2.0
    assert d["done"] == sorted(d["done"])


def test_a_resumed_run_continues_the_stored_timeline() -> None:
    first = Timeline(every_s=1.0)
    first.start(empty_timeline(1.0))
    p = _progress(done=10, failed=2)
    p.tally("alpha").answered = 10
    first.take(0.0, 50.0, p)
    second = Timeline(every_s=1.0)
    second.start(load_timeline(first.dump()))
    p2 = _progress(done=1)  # the new run counts from zero
    p2.tally("alpha").answered = 1
    second.take(0.0, 60.0, p2)
    d = second.data
    assert d["done"] == [12, 13]
    assert d["failed"] == [2, 2]
    assert d["providers"]["alpha"]["answered"] == [10, 11]


def test_an_unreadable_blob_is_an_empty_timeline() -> None:
    assert load_timeline(b"not json")["t"] == []
    assert load_timeline(None, 3.0)["every_s"] == 3.0
