"""Prompt token counting: exact BPE counts, and the estimate that learns from reported usage."""

from __future__ import annotations

import warnings

import pytest

from batchgate.emulator.modes import text_chars
from batchgate.tokens import (
    CHUNK_CHARS,
    CharCounter,
    EstimatingTokenCounter,
    ExactTokenCounter,
    iter_prompt_text,
    load_encoder,
    token_array_tokens,
)

BODY = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "You label reviews."},
        {"role": "user", "content": [{"type": "text", "text": "Great product, works well."}]},
    ],
}


def test_prompt_text_covers_roles_parts_and_system() -> None:
    texts = list(iter_prompt_text({**BODY, "system": "top"}))
    assert "top" in texts
    assert "You label reviews." in texts
    assert "Great product, works well." in texts


def test_exact_counter_counts_framing() -> None:
    counter = ExactTokenCounter()
    bare = counter.count_text("You label reviews.") + counter.count_text("Great product, works well.")
    # two messages (3 framing each + role token) and 3 to prime the reply
    assert counter.count_prompt(BODY) > bare
    assert counter.count_prompt(BODY) == counter.count_prompt(dict(BODY))


def test_estimate_learns_the_worst_ratio_and_stays_stable() -> None:
    counter = EstimatingTokenCounter(safety=1.0)
    raw = counter.raw_estimate(BODY)
    counter.observe(BODY, raw * 2)
    assert counter.count_prompt(BODY) == raw * 2
    # learning again from the same evidence must not compound the factor
    for _ in range(100):
        counter.observe(BODY, raw * 2)
    assert counter.count_prompt(BODY) == raw * 2
    assert abs(counter.factor - 2.0) < 1e-9


def test_estimate_forgets_old_samples() -> None:
    counter = EstimatingTokenCounter(safety=1.0, memory=4)
    raw = counter.raw_estimate(BODY)
    counter.observe(BODY, raw * 3)
    for _ in range(4):
        counter.observe(BODY, raw)
    assert abs(counter.factor - 1.0) < 1e-9


def test_special_token_text_is_counted_as_ordinary_text() -> None:
    counter = ExactTokenCounter()
    quoted = counter.count_text("end <|endoftext|> here")
    # the marker is several ordinary tokens (`<|`, `endo`, ...), not one special token, not an error
    assert quoted > counter.count_text("end  here") + 1


def test_texts_longer_than_the_encoder_takes_at_once_are_counted() -> None:
    counter = ExactTokenCounter()
    piece = "the quick brown fox jumps over the lazy dog. "
    one = counter.count_text(piece * 1000)
    # 45,000 characters a copy; 2.25M characters in all: far past the encoder's one-call limits
    many = counter.count_text(piece * 50_000)
    cuts = len(piece * 50_000) // CHUNK_CHARS
    assert abs(many - one * 50) <= cuts + 50


TEXTS = (
    "Classify the sentiment of this review as positive, negative or neutral.",
    "def f(x):\n    return {'a': [1, 2, 3]}  # code counts differently",
    "日本語のレビュー：とても良い商品でした。",
    "emoji \U0001f600 and accents: héllo, naïve, Ångström",
    "end <|endoftext|> here",
    "",
)


def test_the_rust_encoder_counts_exactly_like_bpe_openai_s_public_api() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # its data loader uses open_binary
        import bpe_openai  # noqa: PLC0415 — the slow public API, only as the reference

        reference = bpe_openai.get_encoding("o200k_base")
    encoder = load_encoder("o200k_base")
    for text in TEXTS:
        assert encoder.count(text) == len(reference.encode_ordinary(text)), text


def test_a_lone_surrogate_is_counted_not_refused() -> None:
    counter = ExactTokenCounter()
    assert counter.count_text("a\ud800b") == counter.count_text("a\ufffdb")


def test_the_encoding_loads_on_the_first_count_and_unknown_ones_fail_then() -> None:
    assert not ExactTokenCounter("o200k_base").loaded  # making one loads nothing
    counter = ExactTokenCounter("o200k_base")
    assert counter.count_text("hello world") == 2
    assert counter.loaded
    with pytest.raises(LookupError, match="klingon_base"):
        ExactTokenCounter("klingon_base").load()


def test_char_counter_charges_the_prompt_text_over_four_and_no_framing() -> None:
    # what OpenAI's limiter is reported to charge, and what the emulator's `chars_per_token`
    # charge computes: the text's characters over four, nothing for roles or the reply's priming
    counter = CharCounter()
    chars = len("You label reviews.") + len("Great product, works well.")
    assert counter.count_prompt(BODY) == -(-chars // 4)
    assert counter.count_prompt(BODY) == -(-text_chars(BODY) // 4)
    assert CharCounter(2.0).count_prompt(BODY) > counter.count_prompt(BODY)
    counter.observe(BODY, 1000)  # learns nothing
    assert counter.count_prompt(BODY) == -(-chars // 4)
    with pytest.raises(ValueError, match="chars_per_token"):
        CharCounter(0)


def test_token_arrays_count_one_token_an_id_with_every_counter() -> None:
    flat = {"input": [5, 6, 7, 8]}
    nested = {"input": [[1, 2], [3, 4, 5], "text is counted as text"]}
    assert token_array_tokens(flat) == 4
    assert token_array_tokens(nested) == 5
    assert token_array_tokens({"prompt": [[1] * 10]}) == 10
    assert token_array_tokens({"input": "no ids"}) == 0
    for counter in (ExactTokenCounter(), CharCounter(), EstimatingTokenCounter()):
        assert counter.count_prompt({"input": list(range(1000))}) >= 1000, counter
