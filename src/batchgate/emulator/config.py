"""The emulator's configuration: frozen value objects, read once from YAML or a dict and validated.

Every key is checked; an unknown key, a wrong type or an out-of-range value raises `ConfigError(file,
key_path, reason)` naming the exact path (`providers[1].limits.rpm`). The gateway's own config
embeds the same shape under `emulator:` via `emulator_config_from_dict`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast, get_args

import yaml

from batchgate.emulator.model_access import read_refused_models
from batchgate.emulator.modes import (
    Charge,
    Enforcement,
    HeaderStyle,
    Neighbour,
    OutputCharge,
    read_charge,
    read_enforcement,
    read_headers,
    read_neighbours,
    read_output_charge,
)
from batchgate.emulator.wire_fields import read_refuse_unknown
from batchgate.errors import ConfigError

Family = Literal["openai", "anthropic", "azure", "gemini", "bedrock"]
Overflow = Literal["queue", "reject"]

FAULT_KINDS: tuple[str, ...] = (
    "server_error", "overloaded", "rate_limit_no_hint", "retry_after_date", "hang", "reset",
    "truncated", "non_json", "insufficient_quota",
    "stall",  # a stream stops mid-answer and hangs (a request not streamed: a hang)
)  # fmt: skip
LIMIT_KEYS: tuple[str, ...] = ("rpm", "tpm", "itpm", "otpm")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-minute limits; None means that dimension is not limited."""

    rpm: int | None = None
    tpm: int | None = None
    itpm: int | None = None
    otpm: int | None = None

    def updated(self, changes: Limits) -> Limits:
        """These limits with every limit that `changes` sets replaced."""
        return replace(self, **{k: v for k in LIMIT_KEYS if (v := getattr(changes, k)) is not None})


@dataclass(frozen=True, slots=True)
class LimitChange:
    at: float
    limits: Limits


@dataclass(frozen=True, slots=True)
class ConcurrencyConfig:
    """A cap on requests in flight; past it, queue or reject with `status` (None: the family's 503/529;
    429: a bare 429 without hints or rate-limit headers, as local servers and proxies answer)."""

    max: int | None = None
    overflow: Overflow = "queue"
    status: int | None = None


@dataclass(frozen=True, slots=True)
class LatencyConfig:
    ttft_p50_ms: float = 0.0
    ttft_sigma: float = 0.5
    per_token_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class FaultRates:
    server_error: float = 0.0
    overloaded: float = 0.0
    rate_limit_no_hint: float = 0.0
    retry_after_date: float = 0.0
    hang: float = 0.0
    reset: float = 0.0
    truncated: float = 0.0
    non_json: float = 0.0
    insufficient_quota: float = 0.0
    stall: float = 0.0

    def items(self) -> tuple[tuple[str, float], ...]:
        return tuple((k, getattr(self, k)) for k in FAULT_KINDS)


@dataclass(frozen=True, slots=True)
class BatchConfig:
    """The provider's Batch API: how long a batch takes, when it expires, its quota and size limits.

    `max_requests` / `max_bytes` of None mean the family's documented limits (OpenAI 50,000 requests
    and 200 MB per input file; Anthropic 100,000 requests and 256 MB per batch).
    """

    processing_seconds: float = 2.0
    expire_after_seconds: float | None = None  # None: the real 24 h window
    enqueued_token_limit: int | None = None  # prompt tokens of in-progress batches; None: no quota
    fail_validation: bool = False  # every batch fails validation (OpenAI) / is refused (Anthropic)
    max_requests: int | None = None
    max_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    name: str
    family: Family
    limits: Limits = field(default_factory=Limits)
    enforced: Limits | None = None
    limit_changes: tuple[LimitChange, ...] = ()
    api_key: str | None = field(default=None, repr=False)
    models: tuple[str, ...] | None = None
    default_max_tokens: int = 1024
    concurrency: ConcurrencyConfig = field(default_factory=ConcurrencyConfig)
    latency: LatencyConfig = field(default_factory=LatencyConfig)
    faults: FaultRates = field(default_factory=FaultRates)
    batch: BatchConfig = field(default_factory=BatchConfig)
    reject_fields: tuple[str, ...] = ()  # body fields refused with a 400, as strict providers do
    refuse_unknown_fields: bool = False  # a 400 for any field the wire does not know (wire_fields)
    enforcement: Enforcement = field(default_factory=Enforcement)
    charge: Charge = field(default_factory=Charge)
    headers: HeaderStyle = "minute"
    output_charge: OutputCharge = "max_tokens"  # kept, or `adjusted` to the real output at the end
    # per-model quotas on the key (OpenAI limits each model apart; a few models share one pool):
    # each group of models and its limits; a model in none of them is held by `limits`
    model_limits: tuple[tuple[tuple[str, ...], Limits], ...] = ()
    neighbours: tuple[Neighbour, ...] = ()  # other traffic on the key, seen only in remaining and 429s
    refused_models: tuple[str, ...] = ()  # models the key may not use: a 403 (model_access.py)


@dataclass(frozen=True, slots=True)
class EmulatorConfig:
    providers: tuple[ProviderConfig, ...]
    seed: int = 0
    window_seconds: float = 1.0
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    source: str = "<dict>"
    record_prompts: bool = False  # keep each request's prompt, in arrival order (`/_emulator/received`)

    def provider(self, name: str) -> ProviderConfig:
        for p in self.providers:
            if p.name == name:
                return p
        raise KeyError(name)


def load_emulator_config(path: str | Path) -> EmulatorConfig:
    """Read and validate an emulator YAML file."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(source, "", f"cannot read the file: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(source, "", f"invalid YAML{where}") from None
    return emulator_config_from_dict(data, source=source)


def emulator_config_from_dict(data: Any, source: str = "<dict>") -> EmulatorConfig:
    """Validate a parsed mapping (the YAML shape) into an EmulatorConfig."""
    r = _Reader(source)
    top = r.mapping(data, "", ("seed", "window_seconds", "max_body_bytes", "record_prompts", "providers"))
    seed = r.integer(top.get("seed", 0), "seed", minimum=None)
    window = r.number(top.get("window_seconds", 1.0), "window_seconds", positive=True)
    if window > 60:
        raise ConfigError(source, "window_seconds", "must be at most 60 (the limits are per minute)")
    max_body = r.integer(top.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES), "max_body_bytes", minimum=1)
    raw_providers = top.get("providers")
    if not isinstance(raw_providers, list) or not raw_providers:
        raise ConfigError(source, "providers", "must be a non-empty list of providers")
    providers = tuple(r.provider(p, f"providers[{i}]") for i, p in enumerate(raw_providers))
    seen: set[str] = set()
    for i, p in enumerate(providers):
        if p.name in seen:
            raise ConfigError(source, f"providers[{i}].name", f"duplicate provider name {p.name!r}")
        seen.add(p.name)
    record = top.get("record_prompts", False)
    if not isinstance(record, bool):
        raise ConfigError(source, "record_prompts", "must be true or false")
    return EmulatorConfig(providers, seed, window, max_body, source, record)


class _Reader:
    """Validation helpers that know the file name and build key paths."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, reason: str) -> ConfigError:
        return ConfigError(self.source, key, reason)

    def mapping(self, value: Any, key: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(key or "<top level>", "must be a mapping")
        for k in value:
            if k not in allowed:
                path = f"{key}.{k}" if key else str(k)
                raise self.fail(path, f"unknown key (allowed: {', '.join(allowed)})")
        return value

    def integer(self, value: Any, key: str, minimum: int | None = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be an integer, got {type(value).__name__}")
        if minimum is not None and value < minimum:
            raise self.fail(key, f"must be >= {minimum}, got {value}")
        return value

    def number(self, value: Any, key: str, *, positive: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"must be a number, got {type(value).__name__}")
        if value < 0 or (positive and value == 0):
            raise self.fail(key, f"must be {'> 0' if positive else '>= 0'}, got {value}")
        return float(value)

    def limits(self, value: Any, key: str, family: str, *, allow_empty: bool = True) -> Limits:
        if value is None:
            value = {}
        m = self.mapping(value, key, LIMIT_KEYS)
        if family != "anthropic":
            for k in ("itpm", "otpm"):
                if k in m:
                    raise self.fail(f"{key}.{k}", "only anthropic providers have itpm/otpm")
        values = {k: None if m.get(k) is None else self.integer(m[k], f"{key}.{k}", 1) for k in LIMIT_KEYS}
        if not allow_empty and all(v is None for v in values.values()):
            raise self.fail(key, "must set at least one limit")
        return Limits(**values)

    def provider(self, value: Any, key: str) -> ProviderConfig:
        allowed = (
            "name", "family", "api_key", "models", "limits", "enforced", "limit_changes",
            "default_max_tokens", "concurrency", "latency", "faults", "batch", "reject_fields",
            "enforcement", "charge", "headers", "output_charge", "model_limits",
            "neighbours", "refused_models", "refuse_unknown_fields",
        )  # fmt: skip
        m = self.mapping(value, key, allowed)
        name = m.get("name")
        if not isinstance(name, str) or not _NAME.match(name) or name.startswith("_"):
            raise self.fail(f"{key}.name", "must be a name of letters, digits, '.', '_' or '-'")
        family = m.get("family")
        if not isinstance(family, str) or family not in get_args(Family):
            raise self.fail(f"{key}.family", f"must be one of {', '.join(get_args(Family))}, got {family!r}")
        api_key = m.get("api_key")
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise self.fail(f"{key}.api_key", "must be a non-empty string or null")
        models = m.get("models")
        if models is not None:
            if not isinstance(models, list) or not models or not all(isinstance(x, str) for x in models):
                raise self.fail(f"{key}.models", "must be a non-empty list of model names or null")
            models = tuple(models)
        limits = self.limits(m.get("limits"), f"{key}.limits", family)
        enforced = m.get("enforced")
        enforced_limits = None if enforced is None else self.limits(enforced, f"{key}.enforced", family)
        return ProviderConfig(
            name=name,
            family=cast("Family", family),
            limits=limits,
            enforced=enforced_limits,
            limit_changes=self.changes(m.get("limit_changes"), f"{key}.limit_changes", family),
            api_key=api_key,
            models=models,
            default_max_tokens=self.integer(
                m.get("default_max_tokens", 1024), f"{key}.default_max_tokens", 1
            ),
            concurrency=self.concurrency(m.get("concurrency"), f"{key}.concurrency"),
            latency=self.latency(m.get("latency"), f"{key}.latency"),
            faults=self.faults(m.get("faults"), f"{key}.faults"),
            batch=self.batch(m.get("batch"), f"{key}.batch"),
            reject_fields=self.names(m.get("reject_fields", []), f"{key}.reject_fields"),
            enforcement=read_enforcement(m.get("enforcement"), self.source, f"{key}.enforcement"),
            charge=read_charge(m.get("charge"), self.source, f"{key}.charge"),
            headers=read_headers(m.get("headers"), self.source, f"{key}.headers"),
            output_charge=read_output_charge(m.get("output_charge"), self.source, f"{key}.output_charge"),
            model_limits=self.model_limits(m.get("model_limits"), f"{key}.model_limits", family),
            neighbours=read_neighbours(m.get("neighbours"), self.source, f"{key}.neighbours"),
            refused_models=read_refused_models(m, self.source, key, family),
            refuse_unknown_fields=read_refuse_unknown(m, self.source, key),
        )

    def model_limits(self, value: Any, key: str, family: str) -> tuple[tuple[tuple[str, ...], Limits], ...]:
        """`{model: limits}`; a key naming several models (`"a,b"`) is one pool they share."""
        if value is None:
            return ()
        if not isinstance(value, Mapping) or not value:
            raise self.fail(key, "must map model names (or 'a,b' for a shared pool) to limits")
        out: list[tuple[tuple[str, ...], Limits]] = []
        seen: set[str] = set()
        for group, limits in value.items():
            models = tuple(m.strip() for m in str(group).split(","))
            if not all(models) or seen.intersection(models):
                raise self.fail(f"{key}.{group}", "must name models, each in one group only")
            seen.update(models)
            out.append((models, self.limits(limits, f"{key}.{group}", family, allow_empty=False)))
        return tuple(out)

    def names(self, value: Any, key: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
            raise self.fail(key, "must be a list of field names")
        return tuple(value)

    def changes(self, value: Any, key: str, family: str) -> tuple[LimitChange, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail(key, "must be a list of {at: seconds, <limit>: value}")
        out: list[LimitChange] = []
        for i, item in enumerate(value):
            m = self.mapping(item, f"{key}[{i}]", ("at", *LIMIT_KEYS))
            if "at" not in m:
                raise self.fail(f"{key}[{i}].at", "is required")
            at = self.number(m["at"], f"{key}[{i}].at")
            limits = self.limits({k: v for k, v in m.items() if k != "at"}, f"{key}[{i}]", family)
            if all(getattr(limits, k) is None for k in LIMIT_KEYS):
                raise self.fail(f"{key}[{i}]", "must change at least one limit")
            if out and at < out[-1].at:
                raise self.fail(f"{key}[{i}].at", "changes must be listed in time order")
            out.append(LimitChange(at, limits))
        return tuple(out)

    def concurrency(self, value: Any, key: str) -> ConcurrencyConfig:
        m = self.mapping(value if value is not None else {}, key, ("max", "overflow", "status"))
        cap = m.get("max")
        cap = None if cap is None else self.integer(cap, f"{key}.max", 1)
        overflow = m.get("overflow", "queue")
        if overflow not in ("queue", "reject"):
            raise self.fail(f"{key}.overflow", f"must be 'queue' or 'reject', got {overflow!r}")
        status = m.get("status")
        if status is not None and (status not in (429, 503, 529) or isinstance(status, bool)):
            raise self.fail(f"{key}.status", f"must be 429, 503 or 529, got {status!r}")
        return ConcurrencyConfig(cap, overflow, status)

    def latency(self, value: Any, key: str) -> LatencyConfig:
        m = self.mapping(
            value if value is not None else {}, key, ("ttft_p50_ms", "ttft_sigma", "per_token_ms")
        )
        return LatencyConfig(
            self.number(m.get("ttft_p50_ms", 0.0), f"{key}.ttft_p50_ms"),
            self.number(m.get("ttft_sigma", 0.5), f"{key}.ttft_sigma"),
            self.number(m.get("per_token_ms", 0.0), f"{key}.per_token_ms"),
        )

    def faults(self, value: Any, key: str) -> FaultRates:
        m = self.mapping(value if value is not None else {}, key, FAULT_KINDS)
        rates = {k: self.number(m.get(k, 0.0), f"{key}.{k}") for k in FAULT_KINDS}
        for k, v in rates.items():
            if v > 1:
                raise self.fail(f"{key}.{k}", f"must be a rate between 0 and 1, got {v}")
        if sum(rates.values()) > 1 + 1e-9:
            raise self.fail(key, "the fault rates must add up to at most 1")
        return FaultRates(**rates)

    def batch(self, value: Any, key: str) -> BatchConfig:
        allowed = (
            "processing_seconds", "expire_after_seconds", "enqueued_token_limit", "fail_validation",
            "max_requests", "max_bytes",
        )  # fmt: skip
        m = self.mapping(value if value is not None else {}, key, allowed)
        fail = m.get("fail_validation", False)
        if not isinstance(fail, bool):
            raise self.fail(f"{key}.fail_validation", f"must be true or false, got {type(fail).__name__}")
        expire = m.get("expire_after_seconds")
        tokens, count, size = (m.get(k) for k in ("enqueued_token_limit", "max_requests", "max_bytes"))
        return BatchConfig(
            processing_seconds=self.number(m.get("processing_seconds", 2.0), f"{key}.processing_seconds"),
            expire_after_seconds=None
            if expire is None
            else self.number(expire, f"{key}.expire_after_seconds", positive=True),
            enqueued_token_limit=None
            if tokens is None
            else self.integer(tokens, f"{key}.enqueued_token_limit", 1),
            fail_validation=fail,
            max_requests=None if count is None else self.integer(count, f"{key}.max_requests", 1),
            max_bytes=None if size is None else self.integer(size, f"{key}.max_bytes", 1),
        )
