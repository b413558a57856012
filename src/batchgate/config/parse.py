"""Turns the raw YAML of a gateway config into `batchgate.config.schema` objects, naming every bad key."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import cast

from batchgate.config.cache_section import read_cache
from batchgate.config.job_spec import FIELDS, parse_job_spec
from batchgate.config.model_limits import cut_per_model
from batchgate.config.network import environment_network, read_transport
from batchgate.config.provider import read_provider
from batchgate.config.schema import (
    Budget,
    GatewayConfig,
    JobSettings,
    Price,
    ProviderConfig,
    QuotaSettings,
    RouteConfig,
    RouteTarget,
    Settings,
    TimeoutConfig,
)
from batchgate.config.section import Section, type_name
from batchgate.config.tracing import read_tracing
from batchgate.endpoints import MAX_EMBEDDING_INPUTS
from batchgate.errors import JobSpecError
from batchgate.models import ROUTE_MODES, RouteMode
from batchgate.policy.circuit import CircuitSettings
from batchgate.policy.poll import PollPolicy
from batchgate.policy.retry import RetrySettings
from batchgate.policy.takeout import TakeOutSettings
from batchgate.quota.store.location import resolve

_TOP = frozenset(
    {
        "providers",
        "routes",
        "settings",
        "prices",
        "budget",
        "job",
        "quota",
        "emulator",
        "fanout",
        "tracing",
        "cache",
    }
)
_QUOTA = frozenset({"store", "namespace"})
_ROUTE = frozenset({"model", "targets", "mode"})
_SETTINGS = frozenset({"concurrency", "retry", "timeouts", "circuit", "seed", "gc_threshold", "transport"})
_RETRY = frozenset({"max_attempts", "base_delay", "max_delay", "max_hint"})
_TIMEOUTS = frozenset({"connect", "total", "hedge", "stream_idle"})
_CIRCUIT = frozenset(
    {"failure_threshold", "open_seconds", "take_out_after", "take_out_grace", "take_out_for", "max_outage"}
)
_PRICE = frozenset({"input", "output", "cached_input", "batch_discount"})
_BUDGET = frozenset({"max_cost_usd", "max_tokens", "allow_unpriced"})
# the job's own options (`job_spec`), read by the parser every front door uses
_JOB_SPEC = FIELDS - {"budget", "validate"}  # the config's `budget:` section holds its budget
_JOB = (
    frozenset(
        {
            "store",
            "error_rate_threshold",
            "error_rate_window",
            "validation_attempts",
            "batch_turnaround_hours",
            "batch_poll",
            "pack_embeddings",
        }
    )
    | _JOB_SPEC
)
_BATCH_POLL = frozenset({"initial", "factor", "maximum"})


def parse_gateway_config(data: object, source: str, environ: Mapping[str, str]) -> GatewayConfig:
    top = Section(data, source, "", _TOP)
    network = environment_network(environ, source)  # the environment, read once
    transport = top.section("settings", _SETTINGS).raw("transport")  # every provider's default
    if transport is not None:
        network = replace(network, transport=read_transport(transport, "settings.transport", source))
    providers = tuple(
        read_provider(top, i, raw, environ, network)
        for i, raw in enumerate(top.items("providers", required=True))
    )
    names = [p.name for p in providers]
    for i, name in enumerate(names):
        if name in names[:i]:
            top.fail(f"providers[{i}].name", f"duplicate provider name {name!r}")
    by_name = {p.name: p for p in providers}
    routes = tuple(_route(top, i, raw, by_name) for i, raw in enumerate(top.items("routes", required=True)))
    models = [r.model for r in routes]
    for i, model in enumerate(models):
        if model in models[:i]:
            top.fail(f"routes[{i}].model", f"duplicate route for model {model!r}")
    emulator = top.raw("emulator")
    if emulator is not None and not isinstance(emulator, Mapping):
        top.fail("emulator", "must be a mapping")
    if any(p.emulated for p in providers) and emulator is None:
        bad = next(i for i, p in enumerate(providers) if p.emulated)
        top.fail(f"providers[{bad}].base_url", "is 'emulator' but the config has no emulator section")
    providers, routes = cut_per_model(top, providers, routes)  # a quota per model on one key
    return GatewayConfig(
        providers=providers,
        routes=routes,
        settings=_settings(top),
        prices=_prices(top, routes),
        budget=_budget(top),
        job=_job(top),
        quota=_quota(top, environ),
        cache=read_cache(top),
        emulator=emulator,
        fanout=_fanout(top, models),
        source=source,
        network=network,
        tracing=read_tracing(top),
    )


def _fanout(top: Section, models: list[str]) -> tuple[str, ...]:
    """`fanout: [route, ...]`: every input line runs on each of these routes (see `run --fanout`)."""
    items: list[str] = []
    for i, item in enumerate(top.items("fanout")):
        if not isinstance(item, str) or item not in models:
            top.fail(f"fanout[{i}]", f"must name a route of the config, got {item!r}")
        items.append(item)
    if items and (len(items) < 2 or len(set(items)) != len(items)):
        top.fail("fanout", "must name at least two different routes")
    return tuple(items)


def _mode(s: Section, name: str) -> RouteMode | None:
    value = s.raw(name)
    if value is None:
        return None
    if value not in ROUTE_MODES:
        s.fail(name, f"must be one of {', '.join(ROUTE_MODES)}, got {value!r}")
    return cast("RouteMode", value)


def _route(top: Section, i: int, raw: object, providers: Mapping[str, ProviderConfig]) -> RouteConfig:
    s = Section(raw, top.source, f"routes[{i}]", _ROUTE)
    model = s.string("model", required=True)
    assert model is not None
    targets: list[RouteTarget] = []
    for j, t in enumerate(s.items("targets", required=True)):
        key = f"targets[{j}]"
        if not isinstance(t, str) or not t:
            s.fail(key, "must be a provider name or provider:model")
        provider, _, renamed = t.partition(":")
        if provider not in providers:
            s.fail(key, f"unknown provider {provider!r} (known: {', '.join(sorted(providers))})")
        targets.append(RouteTarget(provider=provider, model=renamed or None))
    mode = _mode(s, "mode") or "online"
    if mode == "batch-api" and not any(providers[t.provider].batch_api for t in targets):
        s.fail("mode", "is 'batch-api' but no target provider has batch_api enabled")
    return RouteConfig(model=model, targets=tuple(targets), mode=mode)


def _settings(top: Section) -> Settings:
    s = top.section("settings", _SETTINGS)
    r = s.section("retry", _RETRY)
    t = s.section("timeouts", _TIMEOUTS)
    c = s.section("circuit", _CIRCUIT)
    d_retry, d_time, d_circ = RetrySettings(), TimeoutConfig(), CircuitSettings()
    seed = s.raw("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        s.fail("seed", "must be an integer")
    hedge = t.raw("hedge")
    if hedge is not None and not isinstance(hedge, bool):
        t.fail("hedge", "must be true or false")
    return Settings(
        concurrency=s.integer("concurrency", Settings().concurrency) or 1,
        retry=RetrySettings(
            max_attempts=r.integer("max_attempts", d_retry.max_attempts) or 1,
            base_delay=r.number("base_delay", d_retry.base_delay, strict_min=False) or 0.0,
            max_delay=r.number("max_delay", d_retry.max_delay, strict_min=False) or 0.0,
            max_hint=r.number("max_hint", d_retry.max_hint, strict_min=False) or 0.0,
        ),
        timeouts=TimeoutConfig(
            connect=t.number("connect", d_time.connect) or d_time.connect,
            total=t.number("total", d_time.total) or d_time.total,
            hedge=d_time.hedge if hedge is None else hedge,
            stream_idle=t.number("stream_idle", d_time.stream_idle) or d_time.stream_idle,
        ),
        circuit=CircuitSettings(
            failure_threshold=c.integer("failure_threshold", d_circ.failure_threshold) or 1,
            open_seconds=c.number("open_seconds", d_circ.open_seconds) or d_circ.open_seconds,
            take_out=_take_out(c, d_circ.take_out),
        ),
        seed=seed,
        gc_threshold=s.integer("gc_threshold", Settings().gc_threshold, minimum=0) or 0,
    )


def _take_out(c: Section, d: TakeOutSettings) -> TakeOutSettings:
    """When a target whose key is refused or that cannot be reached is taken out (0: never), and
    how long an outage of one that answered before is waited out (`max_outage`; its older name
    `take_out_grace` is read when `max_outage` is absent)."""
    after = c.integer("take_out_after", d.after, minimum=0)
    outage = c.number("max_outage", None, strict_min=False)
    if outage is None:
        outage = c.number("take_out_grace", d.max_outage_seconds, strict_min=False)
    readmit = c.number("take_out_for", d.readmit_seconds, strict_min=False)
    return TakeOutSettings(
        after=d.after if after is None else after,
        max_outage_seconds=d.max_outage_seconds if outage is None else outage,
        readmit_seconds=d.readmit_seconds if readmit is None else readmit,
    )


def _prices(top: Section, routes: tuple[RouteConfig, ...]) -> dict[str, Price]:
    raw = top.raw("prices") or {}
    if not isinstance(raw, Mapping):
        top.fail("prices", "must map model names to prices")
    prices: dict[str, Price] = {}
    sent = sorted({t.model or r.model for r in routes for t in r.targets})  # the models priced
    for model, entry in raw.items():
        if not any(m.startswith(str(model)) for m in sent):  # a typo would leave its model unpriced
            top.fail(f"prices.{model}", f"no route sends to this model (they send to: {', '.join(sent)})")
        p = Section(entry, top.source, f"prices.{model}", _PRICE)
        inp = p.number("input", strict_min=False)
        out = p.number("output", strict_min=False)
        if inp is None or out is None:
            p.fail("input" if inp is None else "output", "is required (USD per million tokens)")
        discount = p.number("batch_discount", 0.5, strict_min=False)
        if discount is not None and discount > 1:
            p.fail("batch_discount", "must be between 0 and 1")
        prices[str(model)] = Price(
            input=inp,
            output=out,
            cached_input=p.number("cached_input", strict_min=False),
            batch_discount=discount if discount is not None else 0.5,
        )
    return prices


def _budget(top: Section) -> Budget:
    b = top.section("budget", _BUDGET)
    allow = b.raw("allow_unpriced")
    if allow is not None and not isinstance(allow, bool):
        b.fail("allow_unpriced", f"must be true or false, got {type_name(allow)}")
    return Budget(
        max_cost_usd=b.number("max_cost_usd"), max_tokens=b.integer("max_tokens"), allow_unpriced=bool(allow)
    )


def _job(top: Section) -> JobSettings:
    j = top.section("job", _JOB)
    threshold = j.number("error_rate_threshold", JobSettings().error_rate_threshold)
    if threshold is not None and threshold > 1:
        j.fail("error_rate_threshold", "must be a fraction between 0 and 1")
    try:
        spec = parse_job_spec({k: j.raw(k) for k in _JOB_SPEC}, accepted=_JOB_SPEC, check_output=_compiles)
    except JobSpecError as exc:
        j.fail(exc.field, exc.reason)
    return JobSettings(
        error_rate_threshold=threshold,
        error_rate_window=j.integer("error_rate_window", 200) or 200,
        validation_attempts=j.integer("validation_attempts", 3) or 3,
        batch_turnaround_hours=j.number("batch_turnaround_hours", 24.0) or 24.0,
        batch_poll=_batch_poll(j),
        store=j.string("store"),
        pack_embeddings=_pack_embeddings(j),
        spec=spec,
    )


def _compiles(regex: str | None, schema: Mapping[str, object] | None) -> None:
    """A config's regex must compile (a run compiles it again, on its time-limited engine)."""
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as exc:
            raise JobSpecError("validate_regex", f"invalid regular expression: {exc}") from None


def _pack_embeddings(j: Section) -> int:
    value = j.integer("pack_embeddings", MAX_EMBEDDING_INPUTS, minimum=0)
    assert value is not None
    if value > MAX_EMBEDDING_INPUTS:
        j.fail(
            "pack_embeddings", f"must be at most {MAX_EMBEDDING_INPUTS} (inputs in one request), got {value}"
        )
    return value


def _quota(top: Section, environ: Mapping[str, str]) -> QuotaSettings:
    q = top.section("quota", _QUOTA)
    name = q.string("store")
    if name is None:
        if q.has("namespace"):
            q.fail("namespace", "needs a redis:// store")
        return QuotaSettings()
    try:
        return QuotaSettings(resolve(name, environ, q.string("namespace")))
    except ValueError as exc:
        q.fail("store", str(exc))


def _batch_poll(job: Section) -> PollPolicy:
    b = job.section("batch_poll", _BATCH_POLL)
    d = PollPolicy()
    initial = b.number("initial", d.initial) or d.initial
    factor = b.number("factor", d.factor) or d.factor
    maximum = b.number("maximum", max(d.maximum, initial)) or d.maximum
    if factor < 1:
        b.fail("factor", f"must be >= 1 (intervals never shrink), got {factor!r}")
    if maximum < initial:
        b.fail("maximum", f"must be >= initial ({initial:g}), got {maximum:g}")
    return PollPolicy(initial=initial, factor=factor, maximum=maximum)
