"""Per-model limits on one key (a provider entry's `models:`): reading them, and cutting the entry
into one quota per model or shared group, each a provider of its own named `entry/models`.

OpenAI limits each model apart (a few model families share one pool, shown on the limits page);
Anthropic limits per model class (shared/PROTOCOLS.md, "Limits are per model"). So one key holds
as many quotas as models:

    - name: openai
      limits: {max_concurrency: 50}          # rpm/tpm here: the models not listed below
      models:
        gpt-4o: {rpm: 500, tpm: 30000}
        "gpt-4o-mini,gpt-4.1-mini": {rpm: 5000, tpm: 2000000}   # one pool they share

A route's target `openai` (or `openai:gpt-4o`) then reaches the quota of the model it sends. Each
quota's `models` is its model scope, which names it in a shared quota store.
"""

from __future__ import annotations

from dataclasses import replace

from batchgate.config.schema import ModelLimits, ProviderConfig, RouteConfig, RouteTarget
from batchgate.config.section import Section
from batchgate.quota.limits import QuotaLimits

MODEL_LIMITS = frozenset({"rpm", "tpm", "itpm", "otpm", "max_concurrency", "burst_seconds"})


def read_model_limits(s: Section, burst_seconds: float | None) -> tuple[ModelLimits, ...]:
    """A provider entry's `models:` — `{model: limits}`, a key `"a,b"` naming a pool several models
    share; a model's `burst_seconds` defaults to the entry's."""
    raw = s.raw("models")
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw:
        s.fail("models", "must map model names (or 'a,b' for a pool they share) to their limits")
    out: list[ModelLimits] = []
    seen: set[str] = set()
    for group, value in raw.items():
        models = tuple(m.strip() for m in str(group).split(","))
        key = f"models.{group}"
        if not all(models) or len(set(models)) != len(models):
            s.fail(key, "must name models: one, or several as 'a,b'")
        if twice := seen.intersection(models):
            s.fail(key, f"names {', '.join(sorted(twice))} again: each model is in one pool only")
        seen.update(models)
        lim = Section(value, s.source, s.key(key), MODEL_LIMITS)
        burst = lim.number("burst_seconds", burst_seconds)
        if burst is not None and burst > 60:
            lim.fail("burst_seconds", f"must be at most 60 (the limits are per minute), got {burst:g}")
        limits = QuotaLimits(
            rpm=lim.number("rpm"),
            tpm=lim.number("tpm"),
            itpm=lim.number("itpm"),
            otpm=lim.number("otpm"),
            burst_seconds=burst,
        )
        if not limits.declared():
            lim.fail("", "must set at least one of rpm, tpm, itpm, otpm")
        out.append(ModelLimits(models, limits, lim.integer("max_concurrency")))
    return tuple(out)


def cut_per_model(
    top: Section, providers: tuple[ProviderConfig, ...], routes: tuple[RouteConfig, ...]
) -> tuple[tuple[ProviderConfig, ...], tuple[RouteConfig, ...]]:
    """Each entry with `models:` cut into its per-model quotas (`entry/models`, only those a route
    sends to) and the entry itself (the models not listed, kept when a route sends one there or
    when no route uses the entry); each route target pointed at the quota of the model it sends."""
    pools = {p.name: {m: g for g in p.model_limits for m in g.models} for p in providers if p.model_limits}
    if not pools:
        return providers, routes
    used: dict[str, set[str]] = {}  # entry -> names of the quotas routes reach

    def target(i: int, j: int, route: RouteConfig, t: RouteTarget) -> RouteTarget:
        if t.provider not in pools:
            return t
        model = t.model or route.model
        group = pools[t.provider].get(model)
        entry = next(p for p in providers if p.name == t.provider)
        if group is None:
            if not entry.limits.declared():
                listed = ", ".join(sorted(pools[t.provider]))
                top.fail(
                    f"routes[{i}].targets[{j}]",
                    f"sends model {model!r} to {t.provider!r}, whose models: has no limits for it "
                    f"(it lists: {listed}); add it there, or give {t.provider!r} limits of its own",
                )
            used.setdefault(t.provider, set()).add(t.provider)
            return t
        name = _pool_name(t.provider, group)
        used.setdefault(t.provider, set()).add(name)
        return replace(t, provider=name)

    new_routes = tuple(
        replace(r, targets=tuple(target(i, j, r, t) for j, t in enumerate(r.targets)))
        for i, r in enumerate(routes)
    )
    out: list[ProviderConfig] = []
    for p in providers:
        if p.name not in pools:
            out.append(p)
            continue
        reached = used.get(p.name)
        if reached is None or p.name in reached:
            out.append(p)
        out.extend(_pool(p, g) for g in p.model_limits if reached and _pool_name(p.name, g) in reached)
    return tuple(out), new_routes


def _pool_name(entry: str, group: ModelLimits) -> str:
    return f"{entry}/{','.join(group.models)}"


def _pool(p: ProviderConfig, group: ModelLimits) -> ProviderConfig:
    """The quota of `group`'s models on `p`'s key: `p`'s connection, `group`'s limits."""
    concurrency = group.max_concurrency if group.max_concurrency is not None else p.max_concurrency
    return replace(
        p,
        name=_pool_name(p.name, group),
        limits=group.limits,
        max_concurrency=concurrency,
        model_limits=(),
        models=group.models,
        entry=p.name,
    )
