"""Counting prompt tokens before a request is sent, so the quota pool can reserve the right amount.

Pluggable: `ExactTokenCounter` uses an offline BPE encoding (bpe-openai ships OpenAI's encodings)
and counts chat messages the way OpenAI charges them; `EstimatingTokenCounter` guesses from the
text length and corrects itself from the usage providers report, biased to over- rather than
under-estimate (an under-estimate provokes 429s, an over-estimate only wastes a little headroom).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

# OpenAI's documented chat accounting: every message costs its content plus ~3 tokens of framing
# and its role (one token for every standard role), and every reply is primed with 3 more.
TOKENS_PER_MESSAGE = 4
TOKENS_PER_REPLY = 3
# The longest text given to the encoder at once: at most 4 UTF-8 bytes a character and at least one
# byte a token keeps a chunk under the encoder's 200,000-token limit.
CHUNK_CHARS = 40_000


def iter_prompt_text(body: Mapping[str, Any]) -> Iterator[str]:
    """Every piece of text in a chat body that a provider counts as prompt (roles excluded: each
    role is a single token, counted in the per-message framing)."""
    system = body.get("system")
    if isinstance(system, str):
        yield system
    elif isinstance(system, list):
        yield from _text_parts(system)
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        yield prompt
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if not isinstance(message, Mapping):
                continue
            content = message.get("content")
            if isinstance(content, str):
                yield content
            elif isinstance(content, list):
                yield from _text_parts(content)


def _text_parts(parts: list[Any]) -> Iterator[str]:
    for part in parts:
        if isinstance(part, Mapping):
            text = part.get("text")
            if isinstance(text, str):
                yield text
        elif isinstance(part, str):
            yield part


def message_count(body: Mapping[str, Any]) -> int:
    messages = body.get("messages")
    n = len(messages) if isinstance(messages, list) else 0
    if body.get("system"):
        n += 1
    return n


class TokenCounter(Protocol):
    def count_prompt(self, body: Mapping[str, Any]) -> int:
        """Prompt tokens the provider will count for this chat body."""
        ...

    def observe(self, body: Mapping[str, Any], actual: int) -> None:
        """Learn from the prompt tokens a provider reported for `body`."""
        ...


@functools.cache
def _encoding(name: str) -> Any:
    import bpe_openai  # noqa: PLC0415 — start-up: loading an encoding costs tens of ms, once

    return bpe_openai.get_encoding(name)


class ExactTokenCounter:
    """Counts with an offline BPE encoding; exact for OpenAI models, so `observe` does nothing."""

    def __init__(self, encoding_name: str = "o200k_base") -> None:
        self.encoding_name = encoding_name
        self._encoding = _encoding(encoding_name)

    @staticmethod
    def shared(encoding_name: str) -> ExactTokenCounter:
        """One counter per encoding for the whole process (it learns nothing, so it can be shared)."""
        return _shared_counter(encoding_name)

    def count_text(self, text: str) -> int:
        """Tokens in `text` read as ordinary text: a prompt that merely contains `<|endoftext|>`
        is counted like the provider counts it, not refused. Long texts are counted in chunks the
        encoder accepts (it refuses 1M characters, or more than 200k tokens, at once); a cut can
        split a token, so a chunked count may exceed the exact one by one token per cut."""
        encode = self._encoding.encode_ordinary
        if len(text) <= CHUNK_CHARS:
            return len(encode(text))
        return sum(len(encode(text[i : i + CHUNK_CHARS])) for i in range(0, len(text), CHUNK_CHARS))

    def count_prompt(self, body: Mapping[str, Any]) -> int:
        total = sum(self.count_text(t) for t in iter_prompt_text(body))
        return total + TOKENS_PER_MESSAGE * message_count(body) + TOKENS_PER_REPLY

    def observe(self, body: Mapping[str, Any], actual: int) -> None:
        return None

    def __repr__(self) -> str:
        return f"ExactTokenCounter({self.encoding_name!r})"


@functools.cache
def _shared_counter(encoding_name: str) -> ExactTokenCounter:
    return ExactTokenCounter(encoding_name)


class EstimatingTokenCounter:
    """Estimates from UTF-8 length, then scales by the worst recent actual/estimated ratio seen."""

    def __init__(self, bytes_per_token: float = 4.0, safety: float = 1.05, memory: int = 64) -> None:
        self.bytes_per_token = bytes_per_token
        self.safety = safety
        self._ratios: list[float] = []
        self._memory = memory
        self._factor = 1.0

    def raw_estimate(self, body: Mapping[str, Any]) -> int:
        size = sum(len(t.encode("utf-8")) for t in iter_prompt_text(body))
        return math.ceil(size / self.bytes_per_token) + TOKENS_PER_MESSAGE * message_count(body) + 3

    def count_prompt(self, body: Mapping[str, Any]) -> int:
        return math.ceil(self.raw_estimate(body) * self._factor)

    def observe(self, body: Mapping[str, Any], actual: int) -> None:
        raw = self.raw_estimate(body)
        if raw <= 0 or actual <= 0:
            return
        self._ratios.append(actual / raw)
        if len(self._ratios) > self._memory:
            del self._ratios[0]
        self._factor = max(self._ratios) * self.safety

    @property
    def factor(self) -> float:
        return self._factor

    def __repr__(self) -> str:
        return f"EstimatingTokenCounter(factor={self._factor:.3f}, samples={len(self._ratios)})"
