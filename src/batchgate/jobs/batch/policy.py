"""Batch-mode policy, pure (no I/O): which mode a route runs in (`online`, `batch-api`, or `auto`
decided by deadline and price), where a route's batches go, when a deadline is too near to wait for
another batch, which batch errors are worth another try; and the config a job runs with (its
remembered --mode / --deadline applied).

Errors are judged by their codes and statuses (structured fields), never by message text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import EllipsisType
from typing import Any, Literal

from batchgate.config import GatewayConfig, JobSpec, ProviderConfig, RouteConfig
from batchgate.jobs.pricing import PriceTable
from batchgate.jobs.store.protocol import JobRecord
from batchgate.models import Usage
from batchgate.providers.batch.common import CANCELLED, EXPIRED, BatchItemResult

Mode = Literal["online", "batch-api"]
HOUR = 3600.0
# Item or batch error codes that say "not processed, try again", on either provider.
RETRYABLE_CODES: frozenset[str] = frozenset(
    {
        EXPIRED,
        CANCELLED,
        "rate_limit_exceeded",  # OpenAI
        "token_limit_exceeded",  # OpenAI: the enqueued-token quota
        "server_error",
        "internal_error",
        "timeout",
        "rate_limit_error",  # Anthropic error types
        "api_error",
        "overloaded_error",
    }
)


@dataclass(frozen=True, slots=True)
class TasksEstimate:
    """What a route has to do: tasks, and (when known) their prompt and output tokens in all."""

    count: int
    prompt_tokens: int = 0
    output_tokens: int = 0


def batch_target(route: RouteConfig, config: GatewayConfig) -> tuple[ProviderConfig, str] | None:
    """The provider and model a route's batches go to: its first target with a Batch API."""
    for target in route.targets:
        provider = config.provider(target.provider)
        if provider.batch_api:
            return provider, target.model or route.model
    return None


def may_batch(config: GatewayConfig) -> bool:
    """Whether any route could run in `batch-api` mode (else a run need not look for batch tasks)."""
    for route in config.routes:
        mode = config.job.mode or route.mode
        if mode != "online" and batch_target(route, config) is not None:
            return True
    return False


def job_deadline(config: GatewayConfig, created_at: float) -> float | None:
    """The job's deadline in wall seconds (`job.deadline_hours` after its creation), or None."""
    hours = config.job.deadline_hours
    return None if hours is None else created_at + hours * HOUR


def hours_until(deadline: float | None, now_wall: float) -> float | None:
    return None if deadline is None else (deadline - now_wall) / HOUR


def deadline_near(deadline: float | None, now_wall: float, turnaround_hours: float) -> bool:
    """True when a new batch might not end before the deadline (it may take `turnaround_hours`)."""
    return deadline is not None and deadline - now_wall < turnaround_hours * HOUR


def batch_saving(route: RouteConfig, config: GatewayConfig, estimate: TasksEstimate) -> float | None:
    """Live cost minus Batch API cost (USD) of `estimate` on the route's batch target; None when
    the route has no batch target or its model has no price. Unknown token counts count as one."""
    target = batch_target(route, config)
    prices = PriceTable(config.prices)
    if target is None or prices.price(target[1]) is None:
        return None
    usage = Usage(max(1, estimate.prompt_tokens), max(1, estimate.output_tokens))
    return prices.cost(target[1], usage) - prices.cost(target[1], usage, batch=True)


def choose_mode(
    route: RouteConfig,
    config: GatewayConfig,
    tasks_estimate: TasksEstimate,
    *,
    hours_left: float | EllipsisType | None = ...,
) -> Mode:
    """The `auto` policy: `batch-api` when every target provider has a Batch API, the deadline
    leaves more than `job.batch_turnaround_hours`, and batching saves money; else `online`.

    `hours_left` is the time left until the deadline (None: no deadline); by default the whole
    `job.deadline_hours` (as for a job that has not started).
    """
    left = config.job.deadline_hours if isinstance(hours_left, EllipsisType) else hours_left
    if tasks_estimate.count <= 0:
        return "online"
    if not all(config.provider(t.provider).batch_api for t in route.targets):
        return "online"
    if left is not None and left <= config.job.batch_turnaround_hours:
        return "online"
    saving = batch_saving(route, config, tasks_estimate)
    return "batch-api" if saving is not None and saving > 0 else "online"


def resolve_mode(
    route: RouteConfig,
    config: GatewayConfig,
    tasks_estimate: TasksEstimate,
    *,
    hours_left: float | EllipsisType | None = ...,
) -> Mode:
    """The mode a route runs in: `job.mode` if set, else the route's; `auto` asks `choose_mode`.
    `batch-api` on a route with no Batch API target (only possible through `job.mode`) is online."""
    mode = config.job.mode or route.mode
    if mode == "online":
        return "online"
    if mode == "batch-api":
        return "batch-api" if batch_target(route, config) is not None else "online"
    return choose_mode(route, config, tasks_estimate, hours_left=hours_left)


def item_retryable(result: BatchItemResult) -> bool:
    """A failed item that was not processed (expired, cancelled) or failed transiently."""
    if result.error is not None and result.error.code in RETRYABLE_CODES:
        return True
    status = result.status_code
    return status is not None and (status in (408, 409, 429) or status >= 500)


def failed_batch_errors(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (code, message) pairs of a failed batch's `errors.data`."""
    errors = raw.get("errors")
    data = errors.get("data") if isinstance(errors, Mapping) else None
    out: list[tuple[str, str]] = []
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, Mapping):
            code, message = entry.get("code"), entry.get("message")
            line = entry.get("line")
            text = message if isinstance(message, str) else ""
            if isinstance(line, int):
                text = f"line {line}: {text}"
            out.append((code if isinstance(code, str) else "batch_failed", text))
    return out


def failed_batch_retryable(errors: list[tuple[str, str]]) -> bool:
    """A failed batch is worth submitting again only when every reason given is a retryable one."""
    return bool(errors) and all(code in RETRYABLE_CODES for code, _ in errors)


def failed_batch_error(errors: list[tuple[str, str]]) -> tuple[str, str]:
    """One (code, message) for the items of a batch that failed validation."""
    if not errors:
        return "batch_failed", "the batch failed validation (no reason given)"
    message = "; ".join(m for _, m in errors[:5] if m) or "the batch failed validation"
    if len(errors) > 5:
        message += f"; and {len(errors) - 5} more"
    return errors[0][0], f"batch failed validation: {message}"


def with_job_overrides(config: GatewayConfig, spec: JobSpec) -> GatewayConfig:
    """The config with the given spec's fields over its `job:` ones (and its budget over the
    config's money budget)."""
    config = replace(config, job=replace(config.job, spec=spec.over(config.job.spec)))
    if spec.budget_usd is not None:
        config = replace(config, budget=replace(config.budget, max_cost_usd=spec.budget_usd))
    return config


def job_config(config: GatewayConfig, job: JobRecord) -> GatewayConfig:
    """The config a job runs with: the spec it remembers over the config's `job:`, a deadline
    given as a time counted in hours from the job's creation (as the Batch API choice counts)."""
    return counted_from(with_job_overrides(config, job.options.spec), job.created_at)


def counted_from(config: GatewayConfig, created_at: float) -> GatewayConfig:
    """The config with a deadline given as a time counted in hours from `created_at` (wall
    seconds): the job's creation, or now for `plan`."""
    spec = config.job.spec
    if spec.deadline is None:
        return config
    spec = replace(spec, deadline=None, deadline_hours=spec.hours_after(created_at))
    return replace(config, job=replace(config.job, spec=spec))
