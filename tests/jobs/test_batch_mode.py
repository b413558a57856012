"""Batch mode against the emulator over real sockets: every Batch API lifecycle path through
`BatchModeRunner` (completed, failed validation, expired with partial results, cancelled, 429 on
creation, over-size input split) for both providers, and a restart that resumes polling the same
batches. The emulator runs on a FakeClock that the runner's own poll sleeps move forward."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import aiohttp
import orjson
import pytest

from batchgate.clock import FakeClock
from batchgate.config import GatewayConfig, ProviderConfig, TimeoutConfig, config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.jobs.batch.events import NoEvents
from batchgate.jobs.batch.ledger import BatchLedger
from batchgate.jobs.batch.mode import BatchModeRunner
from batchgate.jobs.output.files import format_success_line
from batchgate.jobs.pricing import PriceTable
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import JobStore, TaskOutcome, TaskSpec, TaskState
from batchgate.jobs.store.sqlite import SqliteJobStore
from batchgate.providers import make_chat_client
from batchgate.providers.http import SessionTransport, create_session
from clocks import SteppingClock

from .factories import job

pytestmark = pytest.mark.integration
kinds = pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
Kind = Literal["openai", "anthropic", "gemini"]
REVIEWS = ("I loved it, wonderful", "terrible and boring", "it was a film", "great fun, would recommend")
LABELS = ("positive", "negative", "neutral", "positive")
PRICE = {"input": 2.0, "output": 8.0}


class Heard(NoEvents):
    """Batch events that keep the outcomes, and run `then` on each."""

    def __init__(
        self, outcomes: list[TaskOutcome], then: Callable[[TaskOutcome], None] | None = None
    ) -> None:
        self.outcomes = outcomes
        self.then = then

    def outcome(self, outcome: TaskOutcome) -> None:
        self.outcomes.append(outcome)
        if self.then is not None:
            self.then(outcome)


@dataclass
class Rig:
    emu: Emulator
    fake: FakeClock
    config: GatewayConfig
    store: JobStore
    http: aiohttp.ClientSession
    outcomes: list[TaskOutcome]

    def runner(
        self,
        clock: SteppingClock,
        *,
        deadline: float | None = None,
        http: aiohttp.ClientSession | None = None,
    ) -> BatchModeRunner:
        return BatchModeRunner(
            self.config,
            self.store,
            "job1",
            session=http or self.http,
            clock=clock,
            deadline=deadline,
            events=Heard(self.outcomes),
        )

    def batches(self) -> dict[str, int]:
        stats: dict[str, int] = self.emu.stats()["providers"]["p"]["batches"]
        return stats


def gateway_config(
    emu: Emulator, kind: Kind, *, job_extra: dict[str, Any] | None = None, **provider: Any
) -> GatewayConfig:
    return config_from_dict(
        {
            "providers": [{"name": "p", "kind": kind, "base_url": emu.base_url("p"), **provider}],
            "routes": [{"model": "gpt-x", "targets": ["p"], "mode": "batch-api"}],
            "prices": {"gpt-x": PRICE},
            "job": {"batch_poll": {"initial": 1, "factor": 2, "maximum": 4}} | (job_extra or {}),
        }
    )


def task(seq: int, content: str | None = None) -> TaskSpec:
    text = content or f"Classify the sentiment: {REVIEWS[seq % 4]}"
    body = {"model": "gpt-x", "messages": [{"role": "user", "content": text}], "max_tokens": 10}
    return TaskSpec(seq=seq, line_no=seq + 1, custom_id=f"review/{seq}", body=body)


@asynccontextmanager
async def rig(
    kind: Kind,
    *,
    batch: dict[str, Any],
    store: JobStore | None = None,
    n: int = 6,
    content: str | None = None,
    job_extra: dict[str, Any] | None = None,
    **provider: Any,
) -> AsyncIterator[Rig]:
    fake = FakeClock()
    limits = {"rpm": 10**6, "itpm": 10**8, "otpm": 10**8} if kind == "anthropic" else {"rpm": 10**6}
    emu_cfg = {"seed": 3, "providers": [{"name": "p", "family": kind, "limits": limits, "batch": batch}]}
    store = store or MemoryJobStore()
    async with (
        Emulator(emulator_config_from_dict(emu_cfg), clock=fake) as emu,
        create_session(connect_timeout=2.0) as http,
    ):
        await store.create_job(job())
        await store.add_tasks("job1", [task(i, content) for i in range(n)])
        yield Rig(emu, fake, gateway_config(emu, kind, job_extra=job_extra, **provider), store, http, [])
    await store.close()


async def lines(store: JobStore, state: TaskState = TaskState.SUCCEEDED) -> dict[int, dict[str, Any]]:
    return {
        r.seq: orjson.loads(r.output_line or b"{}")
        async for r in store.iter_results("job1", ordered=True, states=[state])
    }


def content(line: dict[str, Any]) -> str:
    text: str = line["response"]["body"]["choices"][0]["message"]["content"]
    return text


@kinds
async def test_completed_batch_gives_live_shaped_lines_at_the_batch_price(kind: Kind) -> None:
    async with rig(kind, batch={"processing_seconds": 5.0}) as r:
        runner = r.runner(SteppingClock(r.fake))
        specs = await r.store.claim_tasks("job1", 100)
        assert await runner.submit(specs) == []
        done = await lines(r.store)
        assert sorted(done) == list(range(6))
        live_client = make_chat_client(
            ProviderConfig(name="p", kind=kind, base_url=r.emu.base_url("p")),
            SessionTransport(r.http),
            TimeoutConfig(),
        )
        live = await live_client.send(dict(task(0).body), model="gpt-x")
        live_line = orjson.loads(
            format_success_line(
                "review/0",
                request_id=live.request_id,
                status_code=live.status,
                body=live.body,
                provider="p",
                attempts=1,
                latency_ms=1.0,
                usage=live.usage,
            )
        )
        prices = PriceTable(r.config.prices)
        for seq, line in done.items():
            assert line.keys() == live_line.keys()
            assert line["response"].keys() == live_line["response"].keys()
            assert line["custom_id"] == f"review/{seq}"
            assert (line["provider"], line["attempts"], line["error"]) == ("p", 1, None)
            assert line["response"]["body"]["object"] == "chat.completion"
            assert content(line) == LABELS[seq % 4]
        assert done[0]["usage"] == live_line["usage"]
        assert content(done[0]) == content(live_line)
        assert len(r.outcomes) == 6
        for outcome in r.outcomes:
            usage = done[outcome.seq]["usage"]
            full = (
                usage["prompt_tokens"] * PRICE["input"] + usage["completion_tokens"] * PRICE["output"]
            ) / 1e6
            assert outcome.cost_usd == pytest.approx(full / 2)
            assert outcome.cost_usd > 0
        assert prices.cost("gpt-x", live.usage, batch=True) == pytest.approx(r.outcomes[0].cost_usd)
        assert (r.batches()["created"], r.batches()["completed"]) == (1, 1)
        [record] = await BatchLedger(r.store, "job1").records()
        assert (record.state, record.ended, sorted(record.seqs)) == ("done", "completed", list(range(6)))
        assert runner.stats.succeeded == 6
        assert runner.stats.batches_ended == {"completed": 1}


@kinds
async def test_failed_validation_fails_the_items_with_the_reason(kind: Kind) -> None:
    async with rig(kind, batch={"fail_validation": True}, n=3) as r:
        runner = r.runner(SteppingClock(r.fake))
        assert await runner.submit(await r.store.claim_tasks("job1", 100)) == []
        failed = await lines(r.store, TaskState.FAILED)
        assert sorted(failed) == [0, 1, 2]
        counts = await r.store.counts("job1")
        assert (counts[TaskState.FAILED], counts[TaskState.SUCCEEDED]) == (3, 0)
        for line in failed.values():
            assert line["error"]["message"]
            assert line["provider"] == "p"
            assert line["usage"] is None
        if kind == "openai":  # the batch was created, then failed validation
            assert {line["error"]["code"] for line in failed.values()} == {"invalid_file"}
            assert (r.batches()["created"], r.batches()["failed"]) == (1, 1)
        else:  # Message Batches refuse it at creation
            assert {line["error"]["code"] for line in failed.values()} == {"bad_request"}
            assert {line["response"]["status_code"] for line in failed.values()} == {400}
            assert r.batches()["created"] == 0
        assert runner.stats.resubmitted == 0


@kinds
async def test_expired_keeps_partial_results_and_resubmits_the_rest(kind: Kind) -> None:
    batch = {"processing_seconds": 10.0, "expire_after_seconds": 4.0}
    async with rig(kind, batch=batch, n=10) as r:
        runtime = r.emu.runtimes["p"]

        def first_outcome(outcome: TaskOutcome) -> None:  # the provider stops expiring batches
            runtime.config = replace(
                runtime.config, batch=replace(runtime.config.batch, expire_after_seconds=None)
            )

        runner = r.runner(SteppingClock(r.fake))
        runner.events = Heard(r.outcomes, then=first_outcome)
        assert await runner.submit(await r.store.claim_tasks("job1", 100)) == []
        done = await lines(r.store)
        assert sorted(done) == list(range(10))
        attempts = sorted(line["attempts"] for line in done.values())
        assert attempts == [1] * 4 + [2] * 6  # 4 came back before the window ended, 6 were batched again
        assert all(content(done[s]) == LABELS[s % 4] for s in done)
        stats = r.batches()
        assert (stats["created"], stats["expired"], stats["completed"]) == (2, 1, 1)
        records = await BatchLedger(r.store, "job1").records()
        assert [(x.round, x.ended, len(x.seqs)) for x in records] == [(1, "expired", 10), (2, "completed", 6)]
        assert runner.stats.resubmitted == 6


@kinds
async def test_expired_leftovers_go_live_when_the_deadline_is_near(kind: Kind) -> None:
    batch = {"processing_seconds": 10.0, "expire_after_seconds": 4.0}
    extra = {"batch_turnaround_hours": 0.001}  # a batch is assumed to take 3.6 s
    async with rig(kind, batch=batch, n=10, job_extra=extra) as r:
        clock = SteppingClock(r.fake)
        runner = r.runner(clock, deadline=r.fake.wall() + 8.0)  # room at first, not after it expires
        live = await runner.submit(await r.store.claim_tasks("job1", 100))
        assert len(live) == 6
        counts = await r.store.counts("job1")
        assert (counts[TaskState.SUCCEEDED], counts[TaskState.RUNNING]) == (4, 6)
        running = [
            x.seq async for x in r.store.iter_results("job1", ordered=True, states=[TaskState.RUNNING])
        ]
        assert sorted(s.seq for s in live) == running
        assert r.batches()["created"] == 1
        assert runner.stats.sent_live == 6


@kinds
async def test_cancel_all_in_process_keeps_partial_results(kind: Kind) -> None:
    async with rig(kind, batch={"processing_seconds": 10.0}, n=10) as r:
        clock = SteppingClock(r.fake, gated=True)
        runner = r.runner(clock)
        submitting = asyncio.ensure_future(runner.submit(await r.store.claim_tasks("job1", 100)))
        await clock.sleeping.wait()  # the batch is recorded and was polled once
        r.fake.advance(5.0)
        cancelling = asyncio.ensure_future(runner.cancel_all())
        assert clock.gate is not None
        clock.gate.set()
        await cancelling
        assert await submitting == []  # the leftovers are neither resubmitted nor sent live
        succeeded = len(await lines(r.store))
        stats = r.batches()
        assert 5 <= succeeded < 10
        assert succeeded == stats["requests_succeeded"]
        assert (stats["created"], stats["cancelled"]) == (1, 1)
        counts = await r.store.counts("job1")
        assert counts[TaskState.RUNNING] == 10 - succeeded
        assert await r.store.requeue_running("job1") == 10 - succeeded
        [record] = await BatchLedger(r.store, "job1").records()
        assert (record.state, record.ended) == ("done", "cancelled")


@kinds
async def test_cancel_after_a_kill_cancels_the_recorded_batches(kind: Kind) -> None:
    async with rig(kind, batch={"processing_seconds": 10.0}, n=10) as r:
        clock = SteppingClock(r.fake, gated=True)
        first = asyncio.ensure_future(r.runner(clock).submit(await r.store.claim_tasks("job1", 100)))
        await clock.sleeping.wait()
        first.cancel()  # the process dies with the batch in progress
        with pytest.raises(asyncio.CancelledError):
            await first
        r.fake.advance(5.0)
        async with create_session(connect_timeout=2.0) as http:  # `batchgate cancel JOB`
            await r.store.requeue_running("job1")
            await r.runner(SteppingClock(r.fake), http=http).cancel_all()
        assert sorted(await lines(r.store)) == [0, 1, 2, 3, 4]  # processed by t = 5 of 10 s
        assert await r.store.requeue_running("job1") == 5
        stats = r.batches()
        assert (stats["created"], stats["cancelled"]) == (1, 1)


@kinds
async def test_creation_refused_with_429_waits_and_retries(kind: Kind) -> None:
    batch = {"processing_seconds": 3.0, "enqueued_token_limit": 100}
    long = "word " * 60  # ~60 prompt tokens: one batch of one fits the quota, two do not
    async with rig(kind, batch=batch, n=2, content=long, batch_max_requests=1) as r:
        clock = SteppingClock(r.fake)
        runner = r.runner(clock)
        assert await runner.submit(await r.store.claim_tasks("job1", 100)) == []
        assert sorted(await lines(r.store)) == [0, 1]
        stats = r.batches()
        assert stats["created"] == 2
        assert stats["refused"] >= 1
        assert runner.stats.creation_refused == stats["refused"]
        assert runner.stats.sent_live == 0


@kinds
@pytest.mark.parametrize("limit", ["max_requests", "max_bytes"])
async def test_oversize_input_is_split_into_several_batches(kind: Kind, limit: str) -> None:
    value = 4 if limit == "max_requests" else 700
    provider: dict[str, Any] = {f"batch_{limit}": value}
    async with rig(kind, batch={"processing_seconds": 2.0, limit: value}, n=10, **provider) as r:
        runner = r.runner(SteppingClock(r.fake))
        assert await runner.submit(await r.store.claim_tasks("job1", 100)) == []
        assert sorted(await lines(r.store)) == list(range(10))
        records = await BatchLedger(r.store, "job1").records()
        assert len(records) >= 3 if limit == "max_requests" else len(records) >= 2
        assert sorted(s for x in records for s in x.seqs) == list(range(10))
        assert (r.batches()["created"], r.batches()["rejected"]) == (len(records), 0)


@kinds
async def test_restart_resumes_the_same_batches_without_submitting_again(kind: Kind, tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    async with rig(kind, batch={"processing_seconds": 10.0}, store=await SqliteJobStore.open(path)) as r:
        clock = SteppingClock(r.fake, gated=True)
        submitting = asyncio.ensure_future(r.runner(clock).submit(await r.store.claim_tasks("job1", 100)))
        await clock.sleeping.wait()  # submitted and recorded, not finished
        submitting.cancel()  # killed
        with pytest.raises(asyncio.CancelledError):
            await submitting
        await r.store.close()
        assert r.batches()["created"] == 1

        r.store = await SqliteJobStore.open(path)  # a new process
        async with create_session(connect_timeout=2.0) as http:
            assert await r.store.requeue_running("job1") == 6
            runner = r.runner(SteppingClock(r.fake), http=http)
            assert await runner.recover() == 6
            assert await r.store.claim_tasks("job1", 100) == []  # live dispatch finds nothing to do
            assert await runner.resume() == []
        done = await lines(r.store)
        assert sorted(done) == list(range(6))
        assert all(content(done[s]) == LABELS[s % 4] for s in done)
        stats = r.batches()
        assert (stats["created"], stats["completed"]) == (1, 1)  # polled, never submitted twice
        assert runner.stats.batches_resumed == 1
        [record] = await BatchLedger(r.store, "job1").records()
        assert record.state == "done"


async def test_claim_batch_tasks_takes_only_batch_mode_routes() -> None:
    store = MemoryJobStore()
    data: dict[str, Any] = {
        "providers": [
            {"name": "p", "kind": "openai", "base_url": "http://127.0.0.1:9/v1"},
            {"name": "local", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "batch_api": False},
        ],
        "routes": [
            {"model": "gpt-x", "targets": ["p"], "mode": "batch-api"},
            {"model": "small", "targets": ["local"], "mode": "auto"},
            {"model": "cheap", "targets": ["p"], "mode": "auto"},
        ],
        "prices": {"cheap": PRICE},
    }
    await store.create_job(job())
    models = ["gpt-x", "small", "cheap", "gpt-x", "small", "cheap"]
    await store.add_tasks(
        "job1", [replace(task(i), body={**task(i).body, "model": m}) for i, m in enumerate(models)]
    )
    async with create_session(connect_timeout=2.0) as http:
        runner = BatchModeRunner(config_from_dict(data), store, "job1", session=http)
        claimed = await runner.claim_batch_tasks()
        assert [t.seq for t in claimed] == [0, 2, 3, 5]
        assert [t.seq for t in await store.claim_tasks("job1", 10)] == [1, 4]
        await store.requeue_running("job1")
        online = BatchModeRunner(
            config_from_dict({**data, "job": {"mode": "online"}}), store, "job1", session=http
        )
        assert await online.claim_batch_tasks() == []
        late = BatchModeRunner(config_from_dict(data), store, "job1", session=http)
        assert [t.seq for t in await late.claim_batch_tasks(hours_left=2.0)] == [0, 3]  # auto: too late


@kinds
async def test_completes_on_real_time_with_the_loop_clock(kind: Kind) -> None:
    store = MemoryJobStore()
    limits = {"rpm": 10**6, "itpm": 10**8, "otpm": 10**8} if kind == "anthropic" else {"rpm": 10**6}
    emu_cfg = {
        "providers": [{"name": "p", "family": kind, "limits": limits, "batch": {"processing_seconds": 0.3}}]
    }
    async with (
        Emulator(emulator_config_from_dict(emu_cfg)) as emu,
        create_session(connect_timeout=2.0) as http,
    ):
        fast = {"batch_poll": {"initial": 0.05, "factor": 2, "maximum": 0.2}}
        config = gateway_config(emu, kind, job_extra=fast)
        await store.create_job(job())
        await store.add_tasks("job1", [task(i) for i in range(4)])
        runner = BatchModeRunner(config, store, "job1", session=http)
        assert await runner.recover() == 0
        claimed = await runner.claim_batch_tasks()
        assert len(claimed) == 4
        assert await runner.submit(claimed) == []
        done = await lines(store)
        assert {s: content(line) for s, line in done.items()} == {s: LABELS[s % 4] for s in range(4)}
        assert all(line["latency_ms"] > 0 for line in done.values())  # submission to results
