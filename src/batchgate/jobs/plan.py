"""The plan: before anything is sent, the projected requests, tokens, cost (live and at the Batch
API discount, and the saving) and quota-bound duration per provider, for `batchgate plan` and
`run --dry-run`, with per provider the time each limit alone needs, the one that binds first and
a suggested concurrency (`plan_limits`); and per route the mode it would run in (`auto` decided
by `choose_mode` from the deadline and the prices) with the cost that mode implies.

Work on a route with several targets is split in proportion to their request quotas, as the
router's headroom-based spreading does in the long run; a batch-mode route's batches go to its
first target with a Batch API.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from batchgate.config import GatewayConfig, ProviderConfig
from batchgate.jobs.batch.policy import TasksEstimate, batch_target, resolve_mode
from batchgate.jobs.fits import RouteFit
from batchgate.jobs.input.read import read_tasks
from batchgate.jobs.pack.group import lines_per_request
from batchgate.jobs.plan_limits import LimitsEntry, limits_entry, render_limits
from batchgate.jobs.pricing import BUILTIN_NOTE, PriceTable
from batchgate.jobs.store.protocol import TaskSpec
from batchgate.models import Usage


@dataclass(slots=True)
class ProviderPlan:
    requests: float = 0.0
    prompt_tokens: float = 0.0
    max_output_tokens: float = 0.0
    cost_usd: float = 0.0
    batch_requests: int = 0  # tasks whose batches would go here (a route's first Batch API target)
    batch_cost_usd: float = 0.0


@dataclass(slots=True)
class RoutePlan:
    tasks: int = 0
    prompt_tokens: float = 0.0  # live: spread over the targets, each counted as the run counts
    max_output_tokens: float = 0.0
    cost_usd: float = 0.0  # live, spread over the targets
    batch_prompt_tokens: int = 0  # everything through the batch target (0 without one)
    batch_output_tokens: int = 0
    batch_cost_usd: float = 0.0


class ProviderEntry(LimitsEntry):
    """One provider's row of the plan: its live and Batch API work, then its limit figures."""

    requests: int
    prompt_tokens: int
    max_output_tokens: int
    cost_usd_max: float
    batch_api_requests: int
    batch_api_cost_usd_max: float | None  # None: no Batch API work would go here
    quota_seconds: float  # the least time its quotas allow for the work: its binding limit's


class RouteEntry(TypedDict):
    tasks: int
    prompt_tokens: int
    configured_mode: str | None
    mode: str
    batch_provider: str | None
    cost_usd_max: float
    batch_api_cost_usd_max: float | None
    planned_cost_usd_max: float


class Plan(TypedDict):
    """What `batchgate plan` prints (`render_plan`) or writes as JSON (`--json`)."""

    input: str
    tasks: int
    providers: dict[str, ProviderEntry]
    prompt_tokens: int
    max_output_tokens: int
    cost_usd_max: float
    batch_api_cost_usd_max: float
    batch_api_saving_usd: float
    routes: dict[str, RouteEntry]
    planned_cost_usd_max: float
    deadline_hours: float | None
    quota_seconds: float
    budget_usd: float | None
    budget_tokens: int | None
    over_budget: bool
    unpriced_models: list[str]
    builtin_priced_models: list[str]


def _weight(p: ProviderConfig) -> float:
    return p.limits.rpm or 1.0


@dataclass(slots=True)
class _Planner:
    """Adds tasks up per provider and per route, counting each at each target as the run does;
    a route's work goes only to the targets that can admit it, and its Batch API work to its
    batch target — so the provider table and the route table are two views of the same sums."""

    config: GatewayConfig
    fit: RouteFit
    prices: PriceTable
    plans: dict[str, ProviderPlan]
    routes: dict[str, RoutePlan]
    used_models: set[str]

    def add(self, body: dict[str, Any]) -> None:  # a request body: the provider-body boundary
        route = next(r for r in self.config.routes if r.model == body["model"])
        rp = self.routes.setdefault(route.model, RoutePlan())
        rp.tasks += 1
        counted: dict[int, int] = {}
        live = [
            (t, p, *self.fit.cost(p, body, counted))
            for t, p in zip(route.targets, self.fit.providers(route.model), strict=True)
        ]
        fitting = [entry for entry in live if self.fit.fits(entry[1], entry[2])] or live
        total_w = sum(_weight(p) for _, p, _, _ in fitting)
        packed = lines_per_request(self.config, body)  # single-text embedding lines share a request
        for target, p, cost, prompt in fitting:
            share = _weight(p) / total_w
            model = target.model or route.model
            self.used_models.add(model)
            price = self.prices.cost(model, Usage(prompt_tokens=prompt, completion_tokens=cost.output_tokens))
            plan = self.plans[p.name]
            plan.requests += share / packed
            plan.prompt_tokens += share * prompt
            plan.max_output_tokens += share * cost.output_tokens
            plan.cost_usd += share * price
            rp.prompt_tokens += share * prompt
            rp.max_output_tokens += share * cost.output_tokens
            rp.cost_usd += share * price
        batch_to = batch_target(route, self.config)
        if batch_to is not None:
            provider, model = batch_to
            cost, prompt = self.fit.cost(provider, body, counted)
            self.used_models.add(model)
            price = self.prices.cost(model, Usage(prompt, cost.output_tokens), batch=True)
            rp.batch_prompt_tokens += prompt
            rp.batch_output_tokens += cost.output_tokens
            rp.batch_cost_usd += price
            self.plans[provider.name].batch_cost_usd += price
            self.plans[provider.name].batch_requests += 1


def make_plan(config: GatewayConfig, input_path: Path) -> Plan:
    fit = RouteFit(config)
    planner = _Planner(
        config, fit, PriceTable(config.prices), {p.name: ProviderPlan() for p in config.providers}, {}, set()
    )
    tasks = 0
    for item in read_tasks(input_path, known_models=config.route_models(), check=fit.problem):
        if isinstance(item, TaskSpec):
            tasks += 1
            planner.add(item.body)
    by_provider = {
        name: _provider_entry(config, name, pl)
        for name, pl in planner.plans.items()
        if pl.requests or pl.batch_requests
    }
    by_route = {model: _route_entry(config, model, rp) for model, rp in planner.routes.items()}
    total_cost = sum(p["cost_usd_max"] for p in by_provider.values())
    batch_cost = sum(p["batch_api_cost_usd_max"] or 0.0 for p in by_provider.values())
    batch_live = sum(r["cost_usd_max"] for r in by_route.values() if r["batch_api_cost_usd_max"] is not None)
    prompt_total = sum(p["prompt_tokens"] for p in by_provider.values())
    output_total = sum(p["max_output_tokens"] for p in by_provider.values())
    budget = config.budget
    over_cost = budget.max_cost_usd is not None and total_cost > budget.max_cost_usd
    over_tokens = budget.max_tokens is not None and prompt_total + output_total > budget.max_tokens
    return {
        "input": str(input_path),
        "tasks": tasks,
        "providers": by_provider,
        "prompt_tokens": prompt_total,
        "max_output_tokens": output_total,
        "cost_usd_max": round(total_cost, 6),
        "batch_api_cost_usd_max": round(batch_cost, 6),
        "batch_api_saving_usd": round(batch_live - batch_cost, 6),
        "routes": by_route,
        "planned_cost_usd_max": round(sum(r["planned_cost_usd_max"] for r in by_route.values()), 6),
        "deadline_hours": config.job.deadline_hours,
        "quota_seconds": max((p["quota_seconds"] for p in by_provider.values()), default=0.0),
        "budget_usd": budget.max_cost_usd,
        "budget_tokens": budget.max_tokens,
        "over_budget": over_cost or over_tokens,
        "unpriced_models": planner.prices.unpriced(sorted(planner.used_models)),
        "builtin_priced_models": sorted(m for m in planner.used_models if planner.prices.from_builtin(m)),
    }


def _provider_entry(config: GatewayConfig, name: str, pl: ProviderPlan) -> ProviderEntry:
    """One provider's row: the live work it would get and what its limits make of it, and the
    Batch API work routed to it (None: it would get none)."""
    limits = limits_entry(config, config.provider(name), pl.requests, pl.prompt_tokens, pl.max_output_tokens)
    return {
        "requests": round(pl.requests),
        "prompt_tokens": round(pl.prompt_tokens),
        "max_output_tokens": round(pl.max_output_tokens),
        "cost_usd_max": round(pl.cost_usd, 6),
        "batch_api_requests": pl.batch_requests,
        "batch_api_cost_usd_max": round(pl.batch_cost_usd, 6) if pl.batch_requests else None,
        **limits,
        "quota_seconds": round(max(limits["dimension_seconds"].values(), default=0.0), 1),
    }


def _route_entry(config: GatewayConfig, model: str, rp: RoutePlan) -> RouteEntry:
    route = next(r for r in config.routes if r.model == model)
    target = batch_target(route, config)
    if target is not None:
        estimate = TasksEstimate(rp.tasks, rp.batch_prompt_tokens, rp.batch_output_tokens)
    else:
        estimate = TasksEstimate(rp.tasks, round(rp.prompt_tokens), round(rp.max_output_tokens))
    mode = resolve_mode(route, config, estimate)
    return {
        "tasks": rp.tasks,
        "prompt_tokens": round(rp.prompt_tokens),
        "configured_mode": config.job.mode or route.mode,
        "mode": mode,
        "batch_provider": target[0].name if target is not None else None,
        "cost_usd_max": round(rp.cost_usd, 6),
        "batch_api_cost_usd_max": round(rp.batch_cost_usd, 6) if target is not None else None,
        "planned_cost_usd_max": round(rp.batch_cost_usd if mode == "batch-api" else rp.cost_usd, 6),
    }


def render_plan(plan: Plan) -> str:
    w = max([12, *(len(n) + 2 for n in plan["providers"])])  # a per-model quota: `entry/model`
    lines = [
        f"plan for {plan['input']}: {plan['tasks']} tasks, {plan['prompt_tokens']} prompt tokens, "
        f"up to {plan['max_output_tokens']} output tokens",
        f"  {'provider':<{w}}{'requests':>10}{'prompt tok':>12}{'max out tok':>13}{'max cost $':>12}"
        f"{'batch API $':>13}{'quota time':>12}{'binds':>8}",
    ]
    for name, p in sorted(plan["providers"].items()):
        batch = p["batch_api_cost_usd_max"]
        lines.append(
            f"  {name:<{w}}{p['requests']:>10}{p['prompt_tokens']:>12}{p['max_output_tokens']:>13}"
            f"{p['cost_usd_max']:>12.4f}{'-' if batch is None else f'{batch:.4f}':>13}"
            f"{p['quota_seconds']:>11.0f}s{p.get('binding_limit') or '-':>8}"
        )
    lines += render_limits(plan["providers"])
    if any(p["batch_api_cost_usd_max"] is not None for p in plan["providers"].values()):
        lines.append("  Batch API: a route's batches all go to its first target with a Batch API")
    lines.append(
        f"  total: at most ${plan['cost_usd_max']:.4f} live, "
        f"${plan['batch_api_cost_usd_max']:.4f} via Batch APIs "
        f"(saving ${plan['batch_api_saving_usd']:.4f}); "
        f"quotas allow it in about {plan['quota_seconds']:.0f} s"
    )
    routes = plan.get("routes") or {}
    if routes:
        deadline = plan.get("deadline_hours")
        lines.append(
            f"  {'route':<24}{'tasks':>8}  {'mode':<22}{'live $':>10}{'batch API $':>13}{'planned $':>11}"
            + (f"   (deadline {deadline:g} h)" if deadline is not None else "")
        )
        for model, r in sorted(routes.items()):
            mode = r["mode"] if r["configured_mode"] != "auto" else f"auto -> {r['mode']}"
            via = r["batch_api_cost_usd_max"]
            lines.append(
                f"  {model:<24}{r['tasks']:>8}  {mode:<22}{r['cost_usd_max']:>10.4f}"
                f"{'-' if via is None else f'{via:.4f}':>13}"
                f"{r['planned_cost_usd_max']:>11.4f}"
            )
        lines.append(f"  as planned: at most ${plan['planned_cost_usd_max']:.4f}")
    limits = []
    if plan["budget_usd"] is not None:
        limits.append(f"${plan['budget_usd']:.4f}")
    if plan.get("budget_tokens") is not None:
        limits.append(f"{plan['budget_tokens']} tokens")
    if limits:
        verdict = (
            "the worst case is OVER it: the run stops when the next request could pass it"
            if plan["over_budget"]
            else "the worst case is within it"
        )
        lines.append(f"  budget {' and '.join(limits)}: {verdict}")
    if plan.get("builtin_priced_models"):
        lines.append(f"  {BUILTIN_NOTE}: {', '.join(plan['builtin_priced_models'])}")
    if plan.get("unpriced_models"):
        unpriced = ", ".join(plan["unpriced_models"])
        lines.append(f"  warning: no price for {unpriced}: their spend counts as $0")
    return "\n".join(lines)
