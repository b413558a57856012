"""Counting prompt tokens before a request is sent, so the quota pool can reserve the right amount.

Pluggable: `ExactTokenCounter` uses an offline BPE encoding (bpe-openai ships OpenAI's encodings)
and counts chat messages the way OpenAI charges them; `EstimatingTokenCounter` guesses from the
text length and corrects itself from the usage providers report, biased to over- rather than
under-estimate (an under-estimate provokes 429s, an over-estimate only wastes a little headroom);
`CharCounter` is the plain characters-per-token guess some limiters charge, with no tokenizer.

An encoding is the one costly thing here, so it sits behind a lazy seam (`load_encoder`): nothing
is loaded until a count needs it, and then only the encoding asked for, straight from bpe-openai's
Rust tokenizer (~60 ms, ~67 MB) rather than through its Python wrapper, whose import decodes every
encoding it ships (~0.8 s, ~140 MB). The wrapper stays the fallback for encodings the Rust side
lacks (gpt2, r50k, p50k).
`CharCounter` is also the default (`tokenizer: auto`): the quota pool's charge model
(`batchgate.quota.charge`) learns what its count is worth at each provider.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import math
import sys
import threading
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

# OpenAI's documented chat accounting: every message costs its content plus ~3 tokens of framing
# and its role (one token for every standard role), and every reply is primed with 3 more.
TOKENS_PER_MESSAGE = 4
TOKENS_PER_REPLY = 3
# The longest text given to the encoder at once: at most 4 UTF-8 bytes a character and at least one
# byte a token keeps a chunk under the encoder's 200,000-token limit.
CHUNK_CHARS = 40_000
_BINDINGS = "bpe_openai._bindings"
_LOADING = threading.Lock()  # an emulator thread and the client may both load the first encoding


def iter_prompt_text(body: Mapping[str, object]) -> Iterator[str]:
    """Every piece of text in a chat body that a provider counts as prompt (roles excluded: each
    role is a single token, counted in the per-message framing)."""
    system = body.get("system")
    if isinstance(system, str):
        yield system
    elif isinstance(system, list):
        yield from _text_parts(system)
    for key in ("prompt", "input", "instructions"):  # completions, embeddings and Responses
        if key in body:  # (a chat body has none of them: no generator for each)
            yield from _loose_text(body[key])
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


def token_array_tokens(body: Mapping[str, object]) -> int:
    """The tokens a body gives as token arrays — an embeddings `input` (or a completions `prompt`)
    that is a list of token ids or a list of such lists: each id is one token, whatever the
    counter (no text to read, and nothing to guess)."""
    total = 0
    for key in ("input", "prompt"):
        value = body.get(key)
        if not isinstance(value, list) or not value:
            continue
        if all(type(t) is int for t in value):
            total += len(value)
            continue
        total += sum(
            len(item) for item in value if isinstance(item, list) and all(type(t) is int for t in item)
        )
    return total


def _loose_text(value: object) -> Iterator[str]:
    """A string, the strings of a list, and the contents of a list's items (Responses input)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                yield item
            elif isinstance(item, Mapping):
                content = item.get("content")
                if isinstance(content, str):
                    yield content
                elif isinstance(content, list):
                    yield from _text_parts(content)


def _text_parts(parts: list[object]) -> Iterator[str]:
    for part in parts:
        if isinstance(part, Mapping):
            text = part.get("text")
            if isinstance(text, str):
                yield text
        elif isinstance(part, str):
            yield part


def message_count(body: Mapping[str, object]) -> int:
    messages = body.get("messages")
    n = len(messages) if isinstance(messages, list) else 0
    if body.get("system"):
        n += 1
    return n


def chat_framing(body: Mapping[str, object]) -> int:
    """The tokens a provider bills for a chat body beyond its text: each message's framing and
    role, and the reply's priming (OpenAI's documented accounting)."""
    return TOKENS_PER_MESSAGE * message_count(body) + TOKENS_PER_REPLY


class TokenCounter(Protocol):
    def count_prompt(self, body: Mapping[str, object]) -> int:
        """Prompt tokens the provider will count for this chat body."""
        ...

    def observe(self, body: Mapping[str, object], actual: int) -> None:
        """Learn from the prompt tokens a provider reported for `body`."""
        ...


class Encoder(Protocol):
    """What a counter needs from an encoding: the token count of ordinary text."""

    def count(self, text: str) -> int: ...


class _RustEncoder:
    """bpe-openai's Rust tokenizer for one encoding, counting text as ordinary text."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def count(self, text: str) -> int:
        try:
            return int(self._tokenizer.count(text))
        except UnicodeEncodeError:  # lone surrogates: count them as U+FFFD, as the wrapper does
            return int(self._tokenizer.count(_sanitized(text)))


class _WrapperEncoder:
    """bpe-openai's public (tiktoken-like) API: slow to import, but it knows every encoding."""

    def __init__(self, name: str) -> None:
        import bpe_openai  # noqa: PLC0415 — start-up: ~0.8 s and ~140 MB, only for encodings Rust lacks

        with warnings.catch_warnings():
            # bpe-openai loads its data with importlib.resources.open_binary (deprecated).
            warnings.simplefilter("ignore", DeprecationWarning)
            self._encoding = bpe_openai.get_encoding(name)

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))


def _sanitized(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


@functools.cache
def _rust_backend() -> ModuleType | None:
    """bpe-openai's compiled module, loaded without the package's `__init__` (which would decode
    every encoding in Python first); None when this bpe-openai is laid out differently. It is
    registered under its own name, so the package, if imported later, finds it loaded (a PyO3
    module can be initialised only once per process)."""
    loaded = sys.modules.get(_BINDINGS)
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_bindings{suffix}"
            if not path.is_file():
                continue
            loader = importlib.machinery.ExtensionFileLoader(_BINDINGS, str(path))
            module_spec = importlib.util.spec_from_file_location(loader.name, path, loader=loader)
            if module_spec is None:
                return None
            try:
                module = importlib.util.module_from_spec(module_spec)
                loader.exec_module(module)
            except ImportError:
                return None
            if not hasattr(module, "tokenizer_for_encoding"):
                return None
            sys.modules[_BINDINGS] = module
            return module
    return None


def load_encoder(name: str) -> Encoder:
    """The encoding `name`, loaded once per process on first use; LookupError if unknown."""
    with _LOADING:
        return _load_encoder(name)


@functools.cache
def _load_encoder(name: str) -> Encoder:
    backend = _rust_backend()
    if backend is not None and name in backend.supported_encodings():
        return _RustEncoder(backend.tokenizer_for_encoding(name))
    try:
        return _WrapperEncoder(name)
    except (LookupError, RuntimeError, ValueError) as exc:  # UnsupportedModelError is all three
        raise LookupError(f"unknown encoding {name!r}") from exc


class ExactTokenCounter:
    """Counts with an offline BPE encoding; exact for OpenAI models, so `observe` does nothing.
    The encoding is loaded on the first count (or by `load()`), not when the counter is made."""

    def __init__(self, encoding_name: str = "o200k_base") -> None:
        self.encoding_name = encoding_name
        self._encoder: Encoder | None = None

    @staticmethod
    def shared(encoding_name: str) -> ExactTokenCounter:
        """One counter per encoding for the whole process (it learns nothing, so it can be shared)."""
        return _shared_counter(encoding_name)

    def load(self) -> ExactTokenCounter:
        """Load the encoding now (LookupError if unknown) rather than on the first count."""
        if self._encoder is None:
            self._encoder = load_encoder(self.encoding_name)
        return self

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    def count_text(self, text: str) -> int:
        """Tokens in `text` read as ordinary text: a prompt that merely contains `<|endoftext|>`
        is counted like the provider counts it, not refused. Long texts are counted in chunks (the
        Python encoder refuses 1M characters, or more than 200k tokens, at once); a cut can split a
        token, so a chunked count may exceed the exact one by one token per cut."""
        encoder = self._encoder or self.load()._encoder
        assert encoder is not None
        if len(text) <= CHUNK_CHARS:
            return encoder.count(text)
        return sum(encoder.count(text[i : i + CHUNK_CHARS]) for i in range(0, len(text), CHUNK_CHARS))

    def count_prompt(self, body: Mapping[str, object]) -> int:
        total = sum(self.count_text(t) for t in iter_prompt_text(body))
        return total + token_array_tokens(body) + chat_framing(body)

    def observe(self, body: Mapping[str, object], actual: int) -> None:
        return None

    def __repr__(self) -> str:
        return f"ExactTokenCounter({self.encoding_name!r})"


@functools.cache
def _shared_counter(encoding_name: str) -> ExactTokenCounter:
    return ExactTokenCounter(encoding_name)


def char_count(body: Mapping[str, object], bytes_per_token: float = 4.0) -> int:
    """UTF-8 bytes of the prompt text ÷ `bytes_per_token`, plus the per-message framing."""
    size = sum(len(t.encode("utf-8")) for t in iter_prompt_text(body))
    return math.ceil(size / bytes_per_token) + token_array_tokens(body) + chat_framing(body)


class CharCounter:
    """`ceil(characters / chars_per_token)`: the guess OpenAI's limiter is reported to charge at
    admission (the prompt's text over four, no framing). Needs no tokenizer and learns nothing."""

    def __init__(self, chars_per_token: float = 4.0) -> None:
        if not chars_per_token > 0:
            raise ValueError("chars_per_token must be > 0")
        self.chars_per_token = chars_per_token

    def count_prompt(self, body: Mapping[str, object]) -> int:
        chars = sum(len(t) for t in iter_prompt_text(body))
        return math.ceil(chars / self.chars_per_token) + token_array_tokens(body)

    def observe(self, body: Mapping[str, object], actual: int) -> None:
        return None

    def __repr__(self) -> str:
        return f"CharCounter({self.chars_per_token:g})"


class EstimatingTokenCounter:
    """Estimates from UTF-8 length, then scales by the worst recent actual/estimated ratio seen."""

    def __init__(self, bytes_per_token: float = 4.0, safety: float = 1.05, memory: int = 64) -> None:
        self.bytes_per_token = bytes_per_token
        self.safety = safety
        self._ratios: list[float] = []
        self._memory = memory
        self._factor = 1.0

    def raw_estimate(self, body: Mapping[str, object]) -> int:
        return char_count(body, self.bytes_per_token)

    def count_prompt(self, body: Mapping[str, object]) -> int:
        return math.ceil(self.raw_estimate(body) * self._factor)

    def observe(self, body: Mapping[str, object], actual: int) -> None:
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
