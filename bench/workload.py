"""The benchmark's workloads: deterministic chat requests, the spec file every system reads, and what
the emulator charges for them (so the quota lower bound comes from the provider's own arithmetic).

A request is `(id, provider, system prompt, user prompt, max_tokens)`. Every prompt is unique, so the
emulator's duplicate-completion counter only counts real duplicates (the same request finished
twice on the same provider). The spec is one JSON file written by the parent, read by each child.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

SYSTEM_PROMPT = "You label product reviews."
_PRODUCTS = ("water bottle", "headphones", "backpack", "desk lamp", "kettle", "running shoes", "router")
_OPINIONS = (
    "Best purchase this year, wonderful design.",
    "Terrible battery, broke after a week.",
    "It arrived on Tuesday in a brown box.",
    "Great sound and a perfect fit.",
    "Useless instructions and a rude support line.",
    "Does what it says, nothing more.",
)
_FILLER_TEXT = (
    "the delivery came early and the packaging was sturdy although one corner was dented "
    "I compared it with two other models in the shop before deciding and the price was fair "
    "my partner uses it every morning and has not complained once which says a lot "
    "after three months of daily use the finish still looks new and nothing rattles "
    "the manual is short but clear and the setup took about ten minutes in total "
)
_FILLER = _FILLER_TEXT.split()


@dataclass(frozen=True, slots=True)
class Request:
    id: str
    provider: str
    system: str
    prompt: str
    max_tokens: int

    def openai_body(self, model: str) -> dict[str, Any]:
        return {
            "model": model,
            "max_tokens": self.max_tokens,
            "messages": [
                {"role": "system", "content": self.system},
                {"role": "user", "content": self.prompt},
            ],
        }

    def anthropic_body(self, model: str) -> dict[str, Any]:
        return {
            "model": model,
            "max_tokens": self.max_tokens,
            "system": self.system,
            "messages": [{"role": "user", "content": self.prompt}],
        }


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """What a client is told about a provider: its family, URL, model and *declared* limits."""

    family: str
    model: str
    limits: Mapping[str, int]
    base_url: str = ""


@dataclass(slots=True)
class Spec:
    """Everything one system run needs; written to JSON by the parent, read by the child."""

    scenario: str
    providers: dict[str, ProviderSpec]
    requests: list[Request]
    timeout: float | None = None  # per-request timeout given to every system (None: its default)
    concurrency: int = 64  # the global semaphore baseline's width
    serial_budget: float = 15.0  # the serial loop stops here and extrapolates
    pause_after_429: float = 1.5  # the cookbook's 15 s pause, time-compressed
    extra: dict[str, Any] = field(default_factory=dict)

    def dump(self, path: Path) -> None:
        data = {
            "scenario": self.scenario,
            "providers": {
                n: {"family": p.family, "model": p.model, "limits": dict(p.limits), "base_url": p.base_url}
                for n, p in self.providers.items()
            },
            "requests": [[r.id, r.provider, r.system, r.prompt, r.max_tokens] for r in self.requests],
            "timeout": self.timeout,
            "concurrency": self.concurrency,
            "serial_budget": self.serial_budget,
            "pause_after_429": self.pause_after_429,
            "extra": self.extra,
        }
        path.write_bytes(orjson.dumps(data))

    @classmethod
    def load(cls, path: Path) -> Spec:
        data = orjson.loads(path.read_bytes())
        return cls(
            scenario=data["scenario"],
            providers={n: ProviderSpec(**p) for n, p in data["providers"].items()},
            requests=[Request(*r) for r in data["requests"]],
            timeout=data["timeout"],
            concurrency=data["concurrency"],
            serial_budget=data["serial_budget"],
            pause_after_429=data["pause_after_429"],
            extra=data["extra"],
        )


def review_prompt(i: int, rng: random.Random, filler_words: int = 0) -> str:
    product = _PRODUCTS[rng.randrange(len(_PRODUCTS))]
    opinion = _OPINIONS[rng.randrange(len(_OPINIONS))]
    text = f"Review #{i}: The {product}: {opinion}"
    if filler_words:
        text += " " + " ".join(_FILLER[rng.randrange(len(_FILLER))] for _ in range(filler_words))
    return (
        "Classify the sentiment of this review as positive, negative or neutral. "
        f"Answer with one word.\n\n{text}"
    )


def iter_requests(
    items: int, providers: Sequence[str], *, max_tokens: int, filler_words: int = 0, seed: int = 1
) -> Iterator[Request]:
    """`items` reviews, each sent to every provider in `providers` (item-major order), lazily."""
    rng = random.Random(seed)
    for i in range(items):
        prompt = review_prompt(i, rng, filler_words)
        for p in providers:
            yield Request(f"item-{i:07d}-{p}", p, SYSTEM_PROMPT, prompt, max_tokens)


def make_requests(
    items: int, providers: Sequence[str], *, max_tokens: int, filler_words: int = 0, seed: int = 1
) -> list[Request]:
    return list(iter_requests(items, providers, max_tokens=max_tokens, filler_words=filler_words, seed=seed))


def cli_lines(requests: Iterable[Request]) -> Iterator[bytes]:
    """The requests as `batchgate run` input (OpenAI Batch shape; the model names the route)."""
    for r in requests:
        yield (
            orjson.dumps(
                {
                    "custom_id": r.id,
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": r.openai_body(route_model(r.provider)),
                }
            )
            + b"\n"
        )


def route_model(provider: str) -> str:
    """The model name batchgate routes to exactly one provider."""
    return f"to-{provider}"


# -- what the emulator charges -------------------------------------------------------------------


@dataclass(slots=True)
class Charges:
    """The emulator's charge for a set of requests on one provider."""

    requests: int = 0
    tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reply_tokens: list[int] = field(default_factory=list)


class Charger:
    """Prices requests exactly as the emulated providers do (same counters, same formulas)."""

    def __init__(self) -> None:
        # imported here (PLC0415): the children (the systems under test) never load the emulator's modules
        from batchgate.emulator.anthropic_api import AnthropicFamily, count_input  # noqa: PLC0415
        from batchgate.emulator.content import answer, fit  # noqa: PLC0415
        from batchgate.emulator.openai_api import OpenAIFamily  # noqa: PLC0415

        self._openai = OpenAIFamily()
        self._anthropic = AnthropicFamily()
        self._count_input, self._answer, self._fit = count_input, answer, fit

    def cost(self, family: str, r: Request) -> tuple[int, int, int]:
        """(input tokens, output tokens charged at admission, reply tokens)."""
        if family == "openai":
            prompt = self._openai.counter.count_prompt(r.openai_body("m"))
            reply = self._fit(self._answer(r.prompt), r.max_tokens, self._openai.count_text)[1]
        else:
            prompt = self._count_input(r.anthropic_body("m"))
            reply = self._fit(self._answer(r.prompt), r.max_tokens, self._anthropic.count_text)[1]
        return prompt, r.max_tokens, reply

    def charges(self, families: Mapping[str, str], requests: Sequence[Request]) -> dict[str, Charges]:
        out = {name: Charges() for name in families}
        for r in requests:
            c = out[r.provider]
            inp, outp, reply = self.cost(families[r.provider], r)
            c.requests += 1
            c.input_tokens += inp
            c.output_tokens += outp
            c.tokens += inp + outp
            c.reply_tokens.append(reply)
        return out


def median_reply_tokens(c: Charges) -> float:
    return statistics.median(c.reply_tokens) if c.reply_tokens else 0.0
