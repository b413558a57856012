"""Which targets of its route can ever admit a request, decided before anything is sent.

A request that costs more than a whole per-minute limit of a target can never run there; the run
sends it only to the targets it fits (the scheduler), and one that fits none is refused here, at
validation and in `plan`, naming every limit that excludes it. Requests are counted exactly as
the run counts them (`request_cost` with each provider's own counter).

Exact counting is only needed near a limit: a prompt never has more tokens than UTF-8 bytes (at
most four a character) plus its framing, so a request whose bound fits under the smallest limit
of its route is passed without tokenizing (a million-line validation pass stays a parsing pass).
"""

from __future__ import annotations

from collections.abc import Mapping

from batchgate.config import GatewayConfig, ProviderConfig
from batchgate.endpoints import CHAT, EMBEDDINGS, PATHS, RESPONSES, endpoint_of
from batchgate.models import Cost, requested_output_tokens
from batchgate.providers.base import make_token_counter
from batchgate.providers.fields import targets_refusal
from batchgate.providers.responses_translate import responses_problem
from batchgate.quota.limits import DIMENSIONS, QuotaLimits, cost_amounts
from batchgate.tokens import (
    TOKENS_PER_MESSAGE,
    TOKENS_PER_REPLY,
    TokenCounter,
    chat_framing,
    iter_prompt_text,
    token_array_tokens,
)

_KEY = {name: key for key, name in DIMENSIONS}
_LOOSE_TEXT = frozenset({"system", "prompt", "input", "instructions"})  # text outside messages


def prompt_upper_bound(body: Mapping[str, object]) -> int:
    """At least as many tokens as any counter gives the prompt (UTF-8 bytes, at most 4 a
    character, plus framing; a token array's ids one each) — computed without encoding anything."""
    plain = _plain_chat_chars(body)
    if plain is not None:  # the same sum as below, without a generator a line
        chars, messages = plain
        return 4 * chars + TOKENS_PER_MESSAGE * messages + TOKENS_PER_REPLY
    chars = sum(len(part) for part in iter_prompt_text(body))
    return 4 * chars + token_array_tokens(body) + chat_framing(body)


def _plain_chat_chars(body: Mapping[str, object]) -> tuple[int, int] | None:
    """The prompt's characters and its messages when its only text is messages' string contents
    (the common line: no system, prompt, input or instructions key, each message a dict); else
    None."""
    messages = body.get("messages")
    if type(messages) is not list or not _LOOSE_TEXT.isdisjoint(body):
        return None
    chars = 0
    for message in messages:
        if type(message) is not dict:
            return None
        content = message.get("content")
        if type(content) is str:
            chars += len(content)
        elif content is not None:
            return None
    return chars, len(messages)


class RouteFit:
    """Per provider: its counter (as the run makes it) and its declared per-minute limits; per
    route, the smallest token limit among its targets (below it, nothing needs counting)."""

    def __init__(self, config: GatewayConfig, *, endpoint: str | None = None) -> None:
        self._endpoint = endpoint  # a batch's one endpoint (serve's /v1/batches); None: any
        self._counters: dict[str, TokenCounter] = {p.name: make_token_counter(p) for p in config.providers}
        self._limits = {
            p.name: QuotaLimits(
                rpm=p.limits.rpm, tpm=p.limits.tpm, itpm=p.limits.itpm, otpm=p.limits.otpm
            ).declared()
            for p in config.providers
        }
        self._routes = {r.model: [config.provider(t.provider) for t in r.targets] for r in config.routes}
        self._floor = {model: min(map(self._smallest, ps)) for model, ps in self._routes.items()}
        self._default_out = {
            model: max(p.default_max_tokens for p in ps) for model, ps in self._routes.items()
        }

    def _smallest(self, p: ProviderConfig) -> float:
        limits = self._limits[p.name]
        if limits.get("requests", 1.0) < 1.0:
            return -1.0  # not even one request a minute: always look closer
        tokens = [v for k, v in limits.items() if k != "requests"]
        return min(tokens, default=float("inf"))

    def providers(self, model: str) -> list[ProviderConfig]:
        return self._routes[model]

    def cost(
        self, provider: ProviderConfig, body: Mapping[str, object], counted: dict[int, int] | None = None
    ) -> tuple[Cost, int]:
        """What `body` reserves at `provider`, and its prompt count there (as the run counts).
        `counted` shares a prompt's count between providers using the same counter, as the
        scheduler does (one exact tokenizer serves every provider that uses it)."""
        counter = self._counters[provider.name]
        prompt = counted.get(id(counter)) if counted is not None else None
        if prompt is None:
            cost, prompt = request_cost(counter, body, provider.default_max_tokens)
            if counted is not None:
                counted[id(counter)] = prompt
            return cost, prompt
        output = requested_output_tokens(body, provider.default_max_tokens)
        return Cost(requests=1, tokens=prompt + output, input_tokens=prompt, output_tokens=output), prompt

    def fits(self, provider: ProviderConfig, cost: Cost) -> bool:
        """Whether `cost` is within every declared per-minute limit of `provider`."""
        return self._over(provider, cost) is None

    def problem(self, body: Mapping[str, object]) -> str | None:
        """None when some target of the request's route can admit it; else why none can."""
        model = body.get("model")
        if not isinstance(model, str) or model not in self._routes:
            return None  # an unknown model is reported on its own
        endpoint = endpoint_of(body)
        if self._endpoint is not None and endpoint != self._endpoint:
            return f"url {PATHS[endpoint]} does not match the batch's endpoint {PATHS[self._endpoint]}"
        if endpoint != CHAT:
            return self._endpoint_problem(model, body)
        if (refused := targets_refusal(self._routes[model], body)) is not None:
            return refused
        output = requested_output_tokens(body, self._default_out[model])
        if prompt_upper_bound(body) + output <= self._floor[model]:
            return None  # the common case: far below every limit, nothing counted
        excluded = []
        counted: dict[int, int] = {}
        for p in self._routes[model]:
            reason = self._over(p, self.cost(p, body, counted)[0])
            if reason is None:
                return None
            excluded.append(reason)
        return f"request can never be admitted by any target of route {model!r}: {'; '.join(excluded)}"

    def _endpoint_problem(self, model: str, body: Mapping[str, object]) -> str | None:
        """Why route `model` cannot carry `body` (not chat), or None when it can: an Anthropic target
        takes a Responses body it can translate (naming the field it cannot), a Gemini target
        embeddings, nothing else."""
        endpoint = endpoint_of(body)
        path = PATHS[endpoint]
        for p in self._routes[model]:
            if p.openai_wire or (p.kind == "gemini" and endpoint == EMBEDDINGS):
                continue
            if endpoint != RESPONSES or p.kind == "gemini":  # nor embeddings, legacy completions
                return (
                    f"url {path}: route {model!r} has target {p.name!r} ({p.kind}), which does not serve it"
                )
            problem = responses_problem(body)
            if problem is not None:
                return f"url {path}: route {model!r} has target {p.name!r} ({p.kind}): {problem}"
        return None

    def _over(self, p: ProviderConfig, cost: Cost) -> str | None:
        declared = self._limits[p.name]
        for name, amount in cost_amounts(cost, declared).items():
            limit = declared[name]
            if amount > limit:
                what = name.replace("_", " ")
                return f"{p.name} needs {amount:g} {what}, allows at most {limit:g} per minute ({_KEY[name]})"
        return None


def request_cost(
    counter: TokenCounter, body: Mapping[str, object], default_max_tokens: int
) -> tuple[Cost, int]:
    """What `body` reserves at a provider counting prompts with `counter`, and its prompt count:
    the one way a run, `plan` and validation count a request."""
    prompt = counter.count_prompt(body)
    output = requested_output_tokens(body, default_max_tokens)
    return Cost(requests=1, tokens=prompt + output, input_tokens=prompt, output_tokens=output), prompt
