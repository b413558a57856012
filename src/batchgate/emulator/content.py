"""Deterministic answers derived from the prompt, so demos print something meaningful and tests can
assert on it: a sentiment label, a short summary, or an echo. Pure functions, no I/O, no randomness.
"""

from __future__ import annotations

import re
from collections.abc import Callable

SUMMARY_WORDS = 12
ECHO_WORDS = 12
LABELS = ("positive", "negative", "neutral")

_WORD = re.compile(r"[a-z']+")
_POSITIVE = frozenset(
    [
        "good",
        "great",
        "excellent",
        "love",
        "loved",
        "loving",
        "like",
        "liked",
        "wonderful",
        "amazing",
        "fantastic",
        "happy",
        "best",
        "awesome",
        "enjoy",
        "enjoyed",
        "delightful",
        "brilliant",
        "perfect",
        "pleasant",
        "superb",
        "nice",
        "recommend",
        "beautiful",
        "fun",
    ]
)
_NEGATIVE = frozenset(
    [
        "bad",
        "terrible",
        "awful",
        "hate",
        "hated",
        "horrible",
        "worst",
        "poor",
        "boring",
        "sad",
        "disappointing",
        "disappointed",
        "angry",
        "broken",
        "useless",
        "waste",
        "annoying",
        "ugly",
        "slow",
        "refund",
        "never",
        "rude",
        "dislike",
    ]
)
_NEGATORS = frozenset(["not", "no", "never", "isn't", "wasn't", "don't", "didn't", "hardly"])
_ASKS_SENTIMENT = ("sentiment", "classify", "classification")
_ASKS_SUMMARY = "summar"


def sentiment(text: str) -> str:
    """positive, negative or neutral from small word lists; a negator flips the next word."""
    score = 0
    flip = False
    for word in _WORD.findall(text.lower()):
        if word in _NEGATORS:
            flip = True
            continue
        value = 1 if word in _POSITIVE else -1 if word in _NEGATIVE else 0
        if value:
            score += -value if flip else value
        flip = False
    return "positive" if score > 0 else "negative" if score < 0 else "neutral"


def _subject(prompt: str) -> str:
    """The text the instruction is about: what follows the first colon, or the prompt itself."""
    _, sep, tail = prompt.partition(":")
    return tail.strip() if sep and tail.strip() else prompt.strip()


_ASKS_WORDS = re.compile(r"\bwrite (\d{1,5}) words\b")  # a long answer, to stream: "write 200 words"
MAX_WORDS = 20_000
_FILLER = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "again")


def answer(prompt: str) -> str:
    """The reply to the last user message `prompt`."""
    lowered = prompt.lower()
    if (asked := _ASKS_WORDS.search(lowered)) is not None:
        count = min(int(asked.group(1)), MAX_WORDS)
        return " ".join(_FILLER[i % len(_FILLER)] for i in range(count))  # a token a word
    if any(word in lowered for word in _ASKS_SENTIMENT):
        return sentiment(_subject(prompt))
    if _ASKS_SUMMARY in lowered:
        return " ".join(_subject(prompt).split()[:SUMMARY_WORDS])
    return "echo: " + " ".join(prompt.split()[:ECHO_WORDS])


def fit(text: str, max_tokens: int, count: Callable[[str], int]) -> tuple[str, int, bool]:
    """`text` cut to at most `max_tokens` tokens by whole words: (text, tokens, was_cut)."""
    tokens = count(text)
    if tokens <= max_tokens:
        return text, tokens, False
    words = text.split()
    kept = ""
    kept_tokens = 0
    for word in words:
        candidate = f"{kept} {word}" if kept else word
        n = count(candidate)
        if n > max_tokens:
            break
        kept, kept_tokens = candidate, n
    return kept, kept_tokens, True


def last_user_text(messages: list[dict[str, object]]) -> str:
    """The text of the last user message (string content, or its text parts joined)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return " ".join(p for p in parts if isinstance(p, str))
    return ""
