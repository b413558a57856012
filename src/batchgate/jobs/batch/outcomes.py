"""Batch results as task outcomes, pure: built as live ones are (`jobs.output.outcome`), priced at the
Batch API rate, and the tasks worth another try (expired, cancelled, transiently failed).

With an output check, an answer it refuses is not kept: the task fails as `invalid_output` (billed,
listed for review like a live one). It is not asked again, as a live answer would be: another
round would cost one more batch turnaround for each refusal."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from batchgate.jobs.batch.policy import (
    failed_batch_error,
    failed_batch_errors,
    failed_batch_retryable,
    item_retryable,
)
from batchgate.jobs.checks.output_check import OutputCheck
from batchgate.jobs.output import outcome
from batchgate.jobs.pricing import PriceTable
from batchgate.jobs.report.build import INVALID_CODE
from batchgate.jobs.store.protocol import TaskOutcome, TaskSpec
from batchgate.models import Usage, answer_text
from batchgate.providers.batch.common import BatchItemResult


def custom_id_for(seq: int) -> str:
    """The batch custom_id of task `seq` (valid for both providers whatever the input's ids)."""
    return f"t{seq}"


@dataclass(frozen=True, slots=True)
class BatchContext:
    """What every item of one batch shares."""

    provider: str
    model: str  # the model the requests were sent with (priced when a result names none)
    attempts: int  # the batch's round: how many batches its items have been in
    latency_ms: float  # submission to results


@dataclass(frozen=True, slots=True)
class Rejected:
    """A batch answer the output check refused: billed, not kept."""

    seq: int
    custom_id: str
    provider: str
    tokens: int


def _batch_cost(result: BatchItemResult, ctx: BatchContext, prices: PriceTable) -> tuple[Usage, float]:
    usage = result.usage or Usage()
    model = (result.body or {}).get("model")
    return usage, prices.cost(model if isinstance(model, str) else ctx.model, usage, batch=True)


def success_outcome(
    spec: TaskSpec, result: BatchItemResult, ctx: BatchContext, prices: PriceTable
) -> TaskOutcome:
    usage, cost = _batch_cost(result, ctx, prices)
    return outcome.succeeded(
        spec,
        body=result.body or {},
        usage=usage,
        cost=cost,
        provider=ctx.provider,
        attempts=ctx.attempts,
        latency_ms=ctx.latency_ms,
        status_code=result.status_code or 200,
    )


def invalid_outcome(
    spec: TaskSpec, result: BatchItemResult, problem: str, ctx: BatchContext, prices: PriceTable
) -> TaskOutcome:
    """A refused answer: the task fails as `invalid_output`, with every cent it was billed."""
    _, cost = _batch_cost(result, ctx, prices)
    message = outcome.refused_message(problem, answer_text(result.body))
    return failure_outcome(spec, INVALID_CODE, message, result.status_code, ctx.provider, ctx.attempts, cost)


def failure_outcome(
    spec: TaskSpec,
    code: str,
    message: str,
    status: int | None,
    provider: str,
    attempts: int,
    cost: float = 0.0,
) -> TaskOutcome:
    """A batch task failed for good (logged as `task_failed`: `outcome.log_failed`)."""
    outcome.log_failed(spec, code=code, status=status, provider=provider, attempts=attempts, mode="batch")
    return outcome.failed(
        spec, code=code, message=message, status_code=status, provider=provider, attempts=attempts, cost=cost
    )


def sort_results(
    specs: Mapping[int, TaskSpec],
    results: Iterable[BatchItemResult],
    ctx: BatchContext,
    prices: PriceTable,
    check: OutputCheck | None = None,
) -> tuple[list[TaskOutcome], list[TaskSpec], list[Rejected]]:
    """The outcomes of an ended batch's tasks, the tasks to try again (not processed,
    transiently failed, or missing from the results) and the answers `check` refused (their
    tasks' outcomes are `invalid_output` failures). Results for other custom_ids are ignored."""
    by_id = {r.custom_id: r for r in results}
    outcomes: list[TaskOutcome] = []
    again: list[TaskSpec] = []
    rejected: list[Rejected] = []
    for seq, spec in sorted(specs.items()):
        result = by_id.get(custom_id_for(seq))
        if result is None or (not result.ok and item_retryable(result)):
            again.append(spec)
        elif result.ok:
            problem = check.problem(answer_text(result.body)) if check is not None and check.active else None
            if problem is None:
                outcomes.append(success_outcome(spec, result, ctx, prices))
            else:
                outcomes.append(invalid_outcome(spec, result, problem, ctx, prices))
                tokens = (result.usage or Usage()).total_tokens
                rejected.append(Rejected(seq, spec.custom_id, ctx.provider, tokens))
        else:
            err = result.error
            code, message = (err.code, err.message) if err is not None else ("error", "")
            outcomes.append(
                failure_outcome(spec, code, message, result.status_code, ctx.provider, ctx.attempts)
            )
    return outcomes, again, rejected


def failed_batch_outcomes(
    specs: Mapping[int, TaskSpec], raw: Mapping[str, Any], ctx: BatchContext
) -> tuple[list[TaskOutcome], list[TaskSpec]]:
    """A batch that failed validation: every task fails with its reasons, or all are tried again
    when every reason is a retryable one."""
    errors = failed_batch_errors(raw)
    ordered = [specs[seq] for seq in sorted(specs)]
    if failed_batch_retryable(errors):
        return [], ordered
    code, message = failed_batch_error(errors)
    return [failure_outcome(s, code, message, None, ctx.provider, ctx.attempts) for s in ordered], []
