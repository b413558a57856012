"""The gateway's configuration: a YAML file read once, at the edge, into frozen typed objects.

Every error names the file, the key path and the reason. Environment variables (API keys) are read
here and nowhere else; keys are wrapped in `Secret`, whose repr never shows them.

    providers:
      - name: alpha
        kind: openai              # openai = any OpenAI-compatible server | anthropic | azure | gemini
        base_url: https://api.openai.com/v1     # or "emulator": served by the embedded emulator
        api_key_env: OPENAI_API_KEY
        headers: {x-team: search, x-gateway-key: "${GATEWAY_KEY}"}   # ${VAR}: from the environment
        # kind: azure adds deployment: NAME and api_version: 2024-10-21 (base_url the resource,
        # a deployment URL, or https://RESOURCE.openai.azure.com/openai/v1 without api_version)
        limits: {rpm: 500, tpm: 200000, max_concurrency: 50}   # anthropic may add itpm, otpm;
                                  # burst_seconds: the provider's bucket, if known (else learned)
        output_charge: adjusted   # optional: max_tokens (kept) | adjusted (to the real output at
                                  # the end); default by kind: anthropic adjusted, openai max_tokens
        batch_api: true           # has a Batch API (default); false for vLLM, Ollama, ...
        batch_max_requests: 50000 # optional: cut batches smaller than the documented limits
        batch_max_bytes: 209715200
        models:                   # optional: one quota per model on this key (OpenAI and Anthropic
          gpt-4o: {rpm: 500, tpm: 30000}      # limit each model apart); `limits` then holds the
          "gpt-4o-mini,gpt-4.1-mini": {rpm: 5000, tpm: 2000000}   # models not listed; "a,b": a
                                  # pool those models share (as the provider's limits page shows)
    routes:
      - model: gpt-4o-mini        # the model name requests carry
        targets: [alpha]          # provider, or provider:model to rename the model
        mode: online              # online | batch-api | auto (by deadline and price)
    settings: {concurrency: 512, retry: {...}, timeouts: {...}, circuit: {...}, transport: h1}
                                  # transport: the chat calls' client, h1 | aiohttp (config/network.py)
    prices: {gpt-4o-mini: {input: 0.15, output: 0.60, cached_input: 0.075, batch_discount: 0.5}}
    budget: {max_cost_usd: 5.0, max_tokens: 2000000}
    job:
      error_rate_threshold: 0.5
      error_rate_window: 200
      mode: auto                  # optional: overrides every route's mode
      deadline_hours: 30          # optional: results wanted within this long of the job's creation
                                  # (or deadline: a time, RFC 3339 or unix seconds)
      name: nightly-eval          # optional: the job's own options, as `run` flags and the jobs
      priority: high              # API take them (config/job_spec.py): high | normal | low
      not_before: 2026-12-03T02:00:00Z   # start no earlier than this
      callback_url: https://hooks.example.com/batch   # POSTed when the job ends (signed with
      callback_secret_env: BATCH_WEBHOOK_SECRET       # the whsec_… secret in this variable)
      metadata: {team: search}    # up to 16 string values, kept with the job and shown by `status`
      retry_failed: 2             # rounds of failed tasks run again at the end
      batch_turnaround_hours: 24  # assumed Batch API turnaround (worst case)
      batch_poll: {initial: 5, factor: 1.5, maximum: 60}   # batch status poll intervals, seconds
      store: postgresql://user@db/batch   # optional: the job store (a SQLite path or a URL); --store wins
    quota: {store: redis://host:6379/0, namespace: "batchgate:quota:"}   # optional: where provider
                                  # quotas are shared: memory | local | sqlite:PATH | redis://…
    emulator: {...}               # optional: an embedded emulator (same shape as emulator.yaml)
    fanout: [gpt-4o-mini, claude-haiku]   # optional: run every input line on each of these routes
    tracing: true                 # optional: OpenTelemetry spans to OTLP (the otel extra; config/tracing.py)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, cast

from batchgate.config.bedrock import BedrockSettings
from batchgate.config.cache_section import CacheSettings
from batchgate.config.job_spec import JobSpec
from batchgate.config.network import NetworkSettings
from batchgate.config.tracing import TracingSettings
from batchgate.models import RouteMode
from batchgate.policy.circuit import CircuitSettings
from batchgate.policy.poll import PollPolicy
from batchgate.policy.retry import RetrySettings
from batchgate.quota.limits import QuotaLimits
from batchgate.quota.store.location import StoreSpec

# azure: Azure OpenAI (OpenAI's wire)
ProviderKind = Literal["openai", "anthropic", "azure", "gemini", "bedrock"]
OutputCharge = Literal["max_tokens", "adjusted"]
EMULATOR_BASE_URL = "emulator"


class Secret:
    """An API key: usable by the HTTP client, invisible in repr, str, logs and reports."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True, slots=True)
class VertexTarget:
    """A `kind: gemini` entry on Vertex AI (`vertex: true`): its Google Cloud project and region."""

    project: str
    location: str


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """One quota of a key that limits each model apart (the YAML's `models:`): the models that
    share it (one, or a group the provider documents as one pool) and their per-minute limits."""

    models: tuple[str, ...]
    limits: QuotaLimits
    max_concurrency: int | None = None  # None: the provider entry's


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    name: str
    kind: ProviderKind
    base_url: str
    api_key: Secret | None = None
    api_key_env: str | None = None
    limits: QuotaLimits = field(default_factory=QuotaLimits)  # the YAML's limits: rpm, tpm, itpm, otpm
    max_concurrency: int | None = None  # the YAML's limits.max_concurrency: requests open at once
    tokenizer: str = "auto"  # auto | estimate | an encoding name such as o200k_base
    default_max_tokens: int = 1024
    headers: Mapping[str, str] = field(default_factory=dict)
    batch_api: bool = True  # the provider has a Batch API (false for vLLM, Ollama, ...)
    batch_max_requests: int | None = None  # None: the provider's documented limit
    batch_max_bytes: int | None = None
    output_charge: OutputCharge | None = None  # None: by kind (anthropic adjusts, openai keeps)
    model_limits: tuple[ModelLimits, ...] = ()  # the YAML's `models:` (the loader cuts them out)
    # The models this quota holds, when it is one of a key's per-model quotas (the loader names
    # it `entry/models`); (): whatever the routes send to it.
    models: tuple[str, ...] = ()
    entry: str | None = None  # the YAML entry a per-model quota was cut from (its URL, its emulator)
    network: NetworkSettings = field(default_factory=NetworkSettings)  # proxy, CAs, client cert
    secret_headers: Mapping[str, Secret] = field(default_factory=dict)  # values from `${VAR}`
    deployment: str | None = None  # kind azure: the deployment (None: the URL's, else the model)
    api_version: str | None = None  # kind azure: the `api-version` query (not on /openai/v1)
    vertex: VertexTarget | None = None  # kind gemini on Vertex AI (None: AI Studio's x-goog-api-key)
    bedrock: BedrockSettings | None = None  # kind bedrock: region, profile, ConverseStream

    @property
    def entry_name(self) -> str:
        """The provider entry this quota belongs to: the name `base_urls` and an emulator know."""
        return self.entry or self.name

    @property
    def output_adjusted(self) -> bool:
        """Whether the provider settles the output charge to the real output when an answer ends
        (Anthropic documents it: shared/PROTOCOLS.md); otherwise it keeps `max_tokens` charged."""
        if self.output_charge is None:
            return self.kind == "anthropic"
        return self.output_charge == "adjusted"

    def extra_headers(self) -> dict[str, str]:
        """The provider's own headers for the wire, `${VAR}` ones revealed (only the HTTP clients
        call this)."""
        return {**self.headers, **{k: v.reveal() for k, v in self.secret_headers.items()}}

    @property
    def secret(self) -> Secret | None:
        """What an error message must never show: the key, else a header from the environment."""
        return self.api_key or next(iter(self.secret_headers.values()), None)

    @property
    def openai_wire(self) -> bool:
        """Whether the provider speaks OpenAI's wire (OpenAI-compatible servers and Azure OpenAI)."""
        return self.kind in ("openai", "azure")

    @property
    def emulated(self) -> bool:
        return self.base_url == EMULATOR_BASE_URL


@dataclass(frozen=True, slots=True)
class RouteTarget:
    provider: str
    model: str | None = None  # None: keep the request's model


@dataclass(frozen=True, slots=True)
class RouteConfig:
    model: str
    targets: tuple[RouteTarget, ...]
    mode: RouteMode = "online"


@dataclass(frozen=True, slots=True)
class TimeoutConfig:
    connect: float = 10.0
    total: float = 120.0
    hedge: bool = True  # send a straggler again, first answer wins (false: never a duplicate request)
    stream_idle: float = 30.0  # a stream with no event for this long ends with an error event


@dataclass(frozen=True, slots=True)
class Settings:
    concurrency: int = 512
    retry: RetrySettings = field(default_factory=RetrySettings)
    timeouts: TimeoutConfig = field(default_factory=TimeoutConfig)
    circuit: CircuitSettings = field(default_factory=CircuitSettings)
    seed: int | None = None  # jitter seed; None = random
    gc_threshold: int = 10_000  # youngest-generation GC threshold while a gateway is open; 0 = leave it


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cached_input: float | None = None
    batch_discount: float = 0.5


@dataclass(frozen=True, slots=True)
class Budget:
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    allow_unpriced: bool = False  # run with max_cost_usd although a model has no price ($0)


DEFAULT_ERROR_RATE = 0.9  # the default error budget: more than 90% of the last 200 items failed


@dataclass(frozen=True, slots=True)
class JobSettings:
    # stop when failures / window passes this (the default catches a run where almost nothing
    # succeeds; 1 never stops)
    error_rate_threshold: float | None = DEFAULT_ERROR_RATE
    error_rate_window: int = 200
    validation_attempts: int = 3
    batch_turnaround_hours: float = 24.0  # assumed Batch API turnaround (the providers' window)
    batch_poll: PollPolicy = field(default_factory=PollPolicy)
    store: str | None = None  # the job store: a SQLite path or a postgresql:// URL (--store wins)
    pack_embeddings: int = 2048  # the most single-text embedding lines in one request (0: never pack)
    # the job's own options (name, priority, not_before, deadline, callback, metadata, mode,
    # validation, retry rounds): read by the parser every front door uses (`job_spec`)
    spec: JobSpec = field(default_factory=JobSpec)

    @property
    def mode(self) -> RouteMode | None:
        """Overrides every route's mode when given."""
        return cast("RouteMode | None", self.spec.mode)

    @property
    def deadline_hours(self) -> float | None:
        """Results wanted this long after the job was created (a `deadline:` time is counted
        from the job's creation when it runs)."""
        return self.spec.deadline_hours

    @property
    def validate_regex(self) -> str | None:
        return self.spec.validate_regex

    @property
    def validate_schema(self) -> Mapping[str, object] | None:
        return self.spec.validate_schema


@dataclass(frozen=True, slots=True)
class QuotaSettings:
    """Where provider quotas are shared with other processes (`batchgate.quota.store`); None: not
    configured (a `Gateway` then keeps each quota in its own process, `batchgate run` shares it
    on this machine)."""

    store: StoreSpec | None = None


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    providers: tuple[ProviderConfig, ...]
    routes: tuple[RouteConfig, ...]
    settings: Settings = field(default_factory=Settings)
    prices: Mapping[str, Price] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)
    job: JobSettings = field(default_factory=JobSettings)
    quota: QuotaSettings = field(default_factory=QuotaSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)  # the response cache (issue 43)
    emulator: Mapping[str, object] | None = None  # raw emulator section, parsed by batchgate.emulator
    fanout: tuple[str, ...] = ()  # routes every input line runs on (`run --fanout` overrides)
    source: str = "<dict>"
    network: NetworkSettings = field(default_factory=NetworkSettings)  # the environment's (callbacks)
    tracing: TracingSettings = field(default_factory=TracingSettings)  # `tracing:` (config/tracing.py)

    def provider(self, name: str) -> ProviderConfig:
        for p in self.providers:
            if p.name == name:
                return p
        raise KeyError(name)

    def route_models(self) -> frozenset[str]:
        return frozenset(r.model for r in self.routes)
