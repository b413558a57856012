"""Which embedding lines pack into one request, the packed body, and its answer split back.

A line packs when it is an `/v1/embeddings` body whose `input` is one non-empty string; lines pack
together when everything but their `input` is the same (model, `dimensions`, `encoding_format`,
`user`, …). A pack holds at most `PackLimits.inputs` texts (the provider's 2,048 inputs per request,
PROTOCOLS.md) and at most `PackLimits.tokens` tokens, bounded without tokenizing by UTF-8 bytes (a
token is at least one byte), under the 300,000 tokens a request may hold and a share of the
route's smallest per-minute token limit (a pack must stay admissible, and several must flow).

The answer (`{object: "list", data: [{index, embedding}], usage}`) is split by `index`: each line
gets an embeddings answer of its own (its vector at index 0) and its share of the usage — the
provider reports one total, apportioned by each text's UTF-8 length, largest remainders first, so
the shares add up to the total exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from batchgate.config import GatewayConfig
from batchgate.endpoints import EMBEDDINGS, MAX_EMBEDDING_INPUTS, endpoint_of
from batchgate.jobs.store.protocol import TaskSpec
from batchgate.models import Usage
from batchgate.request_fields import OWN_FIELDS

MAX_REQUEST_TOKENS = 300_000  # OpenAI: a request's embedding inputs together (PROTOCOLS.md)
LIMIT_SHARE = 4  # a pack holds at most a quarter of the smallest per-minute token limit


@dataclass(frozen=True, slots=True)
class PackLimits:
    inputs: int = MAX_EMBEDDING_INPUTS
    tokens: int = MAX_REQUEST_TOKENS


def limits_for(config: GatewayConfig, model: str, inputs: int) -> PackLimits:
    """A pack's limits on route `model`: `inputs` texts (at most 2,048), and tokens under the
    request limit and a quarter of the smallest per-minute token limit of its targets."""
    tokens = MAX_REQUEST_TOKENS
    for route in config.routes:
        if route.model != model:
            continue
        for target in route.targets:
            limits = config.provider(target.provider).limits
            for limit in (limits.tpm, limits.itpm):
                if limit is not None:
                    tokens = min(tokens, int(limit) // LIMIT_SHARE)
    return PackLimits(inputs=max(1, min(inputs, MAX_EMBEDDING_INPUTS)), tokens=max(1, tokens))


def lines_per_request(config: GatewayConfig, body: dict[str, Any]) -> int:
    """How many lines like `body` one request carries in a run with the config's concurrency (1
    when it does not pack): what `plan` divides its requests by. The token bound is not applied."""
    if pack_key(body) is None:
        return 1
    window = max(1024, 4 * config.settings.concurrency)  # the engine's window without options
    return max(1, min(config.job.pack_embeddings, window // 2, MAX_EMBEDDING_INPUTS))


def pack_key(body: dict[str, Any]) -> bytes | None:
    """What a packable line shares with the lines it may pack with; None when it does not pack."""
    text = body.get("input")
    if endpoint_of(body) != EMBEDDINGS or not isinstance(text, str) or not text:
        return None
    rest = {k: v for k, v in body.items() if k != "input" and k not in OWN_FIELDS}
    return orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)


def text_bytes(spec: TaskSpec) -> int:
    """The most tokens a packable line's text can be (its UTF-8 bytes)."""
    text = spec.body["input"]
    assert isinstance(text, str)
    return len(text.encode("utf-8"))


def packed_body(specs: Sequence[TaskSpec]) -> dict[str, Any]:
    """One embeddings body holding every line's text, in order."""
    first = specs[0].body
    body = {k: v for k, v in first.items() if k not in OWN_FIELDS}
    body["input"] = [s.body["input"] for s in specs]
    return body


def shares(total: int, weights: Sequence[int]) -> list[int]:
    """`total` split in proportion to `weights`, largest remainders first: sums to `total`."""
    if not weights:
        return []
    weight = sum(weights)
    if weight <= 0:
        weights, weight = [1] * len(weights), len(weights)
    exact = [total * w / weight for w in weights]
    parts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: exact[i] - parts[i], reverse=True)
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


def split_answer(body: Any, usage: Usage, specs: Sequence[TaskSpec]) -> list[tuple[dict[str, Any], Usage]]:
    """Each line's own embeddings answer and usage share; ValueError when the answer does not hold
    exactly one vector per line, by index."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or len(data) != len(specs):
        raise ValueError(
            f"the answer holds {len(data) if isinstance(data, list) else 0} vectors for {len(specs)} inputs"
        )
    by_index: dict[int, dict[str, Any]] = {}
    for item in data:
        index = item.get("index") if isinstance(item, dict) else None
        if (
            type(index) is not int
            or not 0 <= index < len(specs)
            or index in by_index
            or "embedding" not in item
        ):
            raise ValueError(f"the answer's vectors are not indexed 0..{len(specs) - 1}")
        by_index[index] = item
    prompt = shares(usage.prompt_tokens, [text_bytes(s) for s in specs])
    model = body.get("model")
    out = []
    for i, tokens in enumerate(prompt):
        item = {**by_index[i], "index": 0}
        line = {
            "object": "list",
            "data": [item],
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        out.append((line, Usage(prompt_tokens=tokens)))
    return out
