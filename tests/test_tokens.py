"""Prompt token counting: exact BPE counts, and the estimate that learns from reported usage."""

from __future__ import annotations

from batchgate.tokens import CHUNK_CHARS, EstimatingTokenCounter, ExactTokenCounter, iter_prompt_text

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
