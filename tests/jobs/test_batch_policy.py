"""The batch-mode policy and result sorting (pure), and the batch ledger's record format."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from batchgate.config import GatewayConfig, Price, config_from_dict
from batchgate.errors import JobError
from batchgate.jobs.batch.ledger import INDEX_KEY, BatchLedger, ProviderBatch
from batchgate.jobs.batch.outcomes import BatchContext, Rejected, failed_batch_outcomes, sort_results
from batchgate.jobs.batch.policy import (
    TasksEstimate,
    batch_saving,
    batch_target,
    choose_mode,
    deadline_near,
    failed_batch_error,
    failed_batch_errors,
    failed_batch_retryable,
    item_retryable,
    job_deadline,
    resolve_mode,
)
from batchgate.jobs.checks.output_check import OutputCheck
from batchgate.jobs.pricing import PriceTable
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import TaskSpec, TaskState
from batchgate.models import Usage
from batchgate.providers.batch.common import BatchHandle, BatchItemResult, ItemError

from .factories import job

URL = "https://api.example.invalid/v1"
SOME = TasksEstimate(100, prompt_tokens=50_000, output_tokens=10_000)


def _prices(targets: tuple[str, ...]) -> dict[str, Any]:
    """m's price, and m-large's where a target sends to it (a price no route uses is refused)."""
    large = (
        {"m-large": {"input": 5.0, "output": 15.0}} if any(t.endswith(":m-large") for t in targets) else {}
    )
    return {"m": {"input": 1.0, "output": 4.0}, **large}


def cfg(
    *,
    mode: str = "auto",
    targets: tuple[str, ...] = ("big",),
    prices: dict[str, Any] | None = None,
    job: dict[str, Any] | None = None,
) -> GatewayConfig:
    return config_from_dict(
        {
            "providers": [
                {"name": "big", "kind": "openai", "base_url": URL},
                {"name": "claude", "kind": "anthropic", "base_url": URL},
                {
                    "name": "vllm",
                    "kind": "openai",
                    "base_url": "http://127.0.0.1:8000/v1",
                    "batch_api": False,
                },
            ],
            "routes": [{"model": "m", "targets": list(targets), "mode": mode}],
            "prices": _prices(targets) if prices is None else prices,
            "job": job or {},
        }
    )


def test_auto_prefers_the_batch_api_when_priced_and_there_is_no_deadline() -> None:
    config = cfg()
    assert choose_mode(config.routes[0], config, SOME) == "batch-api"
    saving = batch_saving(config.routes[0], config, SOME)
    assert saving == pytest.approx((50_000 * 1.0 + 10_000 * 4.0) / 1e6 / 2)


@pytest.mark.parametrize(
    ("job_settings", "hours_left", "expected"),
    [
        ({"deadline_hours": 10}, ..., "online"),  # the deadline is shorter than the 24 h turnaround
        ({"deadline_hours": 30}, ..., "batch-api"),
        ({"deadline_hours": 30}, 5.0, "online"),  # most of it is gone already
        ({"deadline_hours": 30}, None, "batch-api"),  # None: no deadline
        ({"deadline_hours": 10, "batch_turnaround_hours": 2}, ..., "batch-api"),
        ({"batch_turnaround_hours": 2}, 2.0, "online"),  # exactly the turnaround leaves no room
    ],
)
def test_auto_needs_room_before_the_deadline(
    job_settings: dict[str, Any], hours_left: float | None, expected: str
) -> None:
    config = cfg(job=job_settings)
    assert choose_mode(config.routes[0], config, SOME, hours_left=hours_left) == expected


def test_auto_stays_online_without_a_saving_or_a_batch_api_everywhere() -> None:
    unpriced = cfg(prices={})
    assert choose_mode(unpriced.routes[0], unpriced, SOME) == "online"
    assert batch_saving(unpriced.routes[0], unpriced, SOME) is None
    no_discount = cfg(prices={"m": {"input": 1.0, "output": 4.0, "batch_discount": 1.0}})
    assert choose_mode(no_discount.routes[0], no_discount, SOME) == "online"
    free = cfg(prices={"m": {"input": 0.0, "output": 0.0}})
    assert choose_mode(free.routes[0], free, SOME) == "online"
    mixed = cfg(targets=("big", "vllm"))
    assert choose_mode(mixed.routes[0], mixed, SOME) == "online"
    assert choose_mode(cfg().routes[0], cfg(), TasksEstimate(0)) == "online"
    assert choose_mode(cfg().routes[0], cfg(), TasksEstimate(3)) == "batch-api"  # tokens unknown


def test_batch_target_is_the_first_with_a_batch_api_and_renames_the_model() -> None:
    config = cfg(targets=("vllm", "claude:m-large", "big"), mode="batch-api")
    target = batch_target(config.routes[0], config)
    assert target is not None
    assert (target[0].name, target[1]) == ("claude", "m-large")
    assert batch_target(cfg(targets=("vllm",), mode="online").routes[0], cfg(targets=("vllm",))) is None


def test_job_mode_overrides_the_routes() -> None:
    config = cfg(mode="online", job={"mode": "batch-api"})
    assert resolve_mode(config.routes[0], config, SOME) == "batch-api"
    config = cfg(mode="batch-api", job={"mode": "online"})
    assert resolve_mode(config.routes[0], config, SOME) == "online"
    only_local = cfg(targets=("vllm",), mode="online", job={"mode": "batch-api"})
    assert resolve_mode(only_local.routes[0], only_local, SOME) == "online"  # nowhere to batch
    auto = cfg(mode="online", job={"mode": "auto", "deadline_hours": 5})
    assert resolve_mode(auto.routes[0], auto, SOME) == "online"
    assert resolve_mode(auto.routes[0], auto, SOME, hours_left=None) == "batch-api"


def test_deadlines() -> None:
    assert job_deadline(cfg(), 1000.0) is None
    assert job_deadline(cfg(job={"deadline_hours": 2}), 1000.0) == 1000.0 + 7200.0
    assert not deadline_near(None, 5.0, 24.0)
    assert deadline_near(10_000.0, 9_000.0, 1.0)  # 1000 s left < 1 h
    assert not deadline_near(10_000.0, 9_000.0, 0.25)  # 1000 s left > 15 min


@pytest.mark.parametrize(
    ("code", "status", "retry"),
    [
        ("batch_expired", None, True),
        ("batch_cancelled", None, True),
        ("overloaded_error", None, True),
        ("rate_limit_exceeded", 429, True),
        ("whatever", 503, True),
        ("whatever", 408, True),
        ("invalid_request_error", None, False),
        ("decimal_out_of_range", 400, False),
    ],
)
def test_item_retryable_by_code_and_status(code: str, status: int | None, retry: bool) -> None:
    result = BatchItemResult("t1", ok=False, error=ItemError(code, "message"), status_code=status)
    assert item_retryable(result) is retry


def test_failed_batch_reasons() -> None:
    raw = {
        "errors": {
            "data": [
                {"code": "invalid_file", "message": "bad file", "line": None},
                {"code": "mismatched_model", "message": "one model per batch", "line": 3},
            ]
        }
    }
    errors = failed_batch_errors(raw)
    assert errors == [("invalid_file", "bad file"), ("mismatched_model", "line 3: one model per batch")]
    assert not failed_batch_retryable(errors)
    code, message = failed_batch_error(errors)
    assert code == "invalid_file"
    assert "bad file" in message
    assert "line 3" in message
    quota = failed_batch_errors({"errors": {"data": [{"code": "token_limit_exceeded", "message": "x"}]}})
    assert failed_batch_retryable(quota)
    assert failed_batch_errors({}) == []
    assert not failed_batch_retryable([])
    assert failed_batch_error([])[0] == "batch_failed"


async def test_ledger_records_round_trip_and_refuse_garbage() -> None:
    store = MemoryJobStore()
    await store.create_job(job())
    ledger = BatchLedger(store, "job1")
    assert await ledger.records() == []
    first = ProviderBatch(BatchHandle("p", "batch_1", "openai"), (0, 1, 2), "gpt-x", 1234.5)
    second = ProviderBatch(BatchHandle("q", "msgbatch_2", "anthropic"), (3,), "claude", 1240.0, round=2)
    await ledger.add(first)
    await ledger.add(second)
    await ledger.add(first)  # once in the index
    assert first.key == "batch:p:batch_1"
    again = BatchLedger(store, "job1")  # what a restarted process reads
    assert await again.records() == [first, second]
    done = await again.finish(first, "expired", 2000.0)
    assert (done.state, done.ended, done.ended_at) == ("done", "expired", 2000.0)
    assert await BatchLedger(store, "job1").open_records() == [second]
    await store.put_blob("job1", second.key, b'{"handle": {"provider": "q"}}')
    with pytest.raises(JobError, match=r"batch:q:msgbatch_2"):
        await BatchLedger(store, "job1").records()
    await store.put_blob("job1", INDEX_KEY, b'{"not": "a list"}')
    with pytest.raises(JobError, match="index"):
        await BatchLedger(store, "job1").keys()


def _spec(seq: int) -> TaskSpec:
    return TaskSpec(
        seq, seq + 1, f"in-{seq}", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    )


def test_sort_results_keeps_answers_fails_bad_items_and_retries_the_unprocessed() -> None:
    body = {"object": "chat.completion", "model": "m-2024", "choices": [], "usage": {}}
    results = [
        BatchItemResult("t0", ok=True, body=body, usage=Usage(1000, 100), status_code=200),
        BatchItemResult(
            "t1", ok=False, error=ItemError("invalid_request_error", "empty content"), status_code=400
        ),
        BatchItemResult("t2", ok=False, error=ItemError("batch_expired", "not processed")),
        BatchItemResult("t9", ok=True, body=body),  # not one of ours: ignored
    ]
    specs = {s: _spec(s) for s in range(4)}  # t3 has no result at all
    prices = PriceTable({"m": Price(input=2.0, output=8.0)})
    ctx = BatchContext("p", "m", attempts=2, latency_ms=1234.0)
    outcomes, again, rejected = sort_results(specs, results, ctx, prices)
    assert rejected == []
    assert [s.seq for s in again] == [2, 3]
    ok, bad = outcomes
    assert (ok.seq, ok.state, ok.attempts, ok.provider) == (0, TaskState.SUCCEEDED, 2, "p")
    assert ok.cost_usd == pytest.approx((1000 * 2.0 + 100 * 8.0) / 1e6 / 2)  # dated name, batch price
    line = orjson.loads(ok.output_line)
    assert (line["custom_id"], line["response"]["body"], line["latency_ms"]) == ("in-0", body, 1234.0)
    assert line["usage"]["total_tokens"] == 1100
    assert (bad.seq, bad.state, bad.error) == (1, TaskState.FAILED, "invalid_request_error: empty content")
    assert orjson.loads(bad.output_line)["response"]["status_code"] == 400


def test_sort_results_fails_answers_the_output_check_refuses_billed_and_not_kept() -> None:
    def body(text: str) -> dict[str, Any]:
        return {"object": "chat.completion", "model": "m", "choices": [{"message": {"content": text}}]}

    results = [
        BatchItemResult("t0", ok=True, body=body("positive"), usage=Usage(1000, 100), status_code=200),
        BatchItemResult("t1", ok=True, body=body("I am not sure"), usage=Usage(1000, 100), status_code=200),
    ]
    specs = {s: _spec(s) for s in range(2)}
    prices = PriceTable({"m": Price(input=2.0, output=8.0)})
    ctx = BatchContext("p", "m", attempts=1, latency_ms=10.0)
    outcomes, again, rejected = sort_results(specs, results, ctx, prices, OutputCheck("positive|negative"))
    assert again == []
    kept, refused = outcomes
    assert kept.state is TaskState.SUCCEEDED
    assert refused.state is TaskState.FAILED
    assert refused.cost_usd == pytest.approx(kept.cost_usd)  # billed like a kept one
    assert (refused.prompt_tokens, refused.completion_tokens) == (0, 0)  # tokens kept: none
    error = orjson.loads(refused.output_line)["error"]
    assert error["code"] == "invalid_output"
    assert "I am not sure" in error["message"]
    assert rejected == [Rejected(1, "in-1", "p", 1100)]
    # without a check, the same answer is kept
    outcomes, _, rejected = sort_results(specs, results, ctx, prices, OutputCheck())
    assert [o.state for o in outcomes] == [TaskState.SUCCEEDED, TaskState.SUCCEEDED]
    assert rejected == []


def test_failed_batch_outcomes() -> None:
    specs = {s: _spec(s) for s in (3, 1)}
    ctx = BatchContext("p", "m", attempts=1, latency_ms=0.0)
    raw = {"errors": {"data": [{"code": "invalid_file", "message": "bad file"}]}}
    outcomes, again = failed_batch_outcomes(specs, raw, ctx)
    assert again == []
    assert [(o.seq, o.state) for o in outcomes] == [(1, TaskState.FAILED), (3, TaskState.FAILED)]
    assert orjson.loads(outcomes[0].output_line)["error"]["code"] == "invalid_file"
    quota = {"errors": {"data": [{"code": "token_limit_exceeded", "message": "later"}]}}
    assert failed_batch_outcomes(specs, quota, ctx) == ([], [specs[1], specs[3]])
