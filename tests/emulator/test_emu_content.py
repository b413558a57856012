"""Deterministic answers derived from the prompt."""

from __future__ import annotations

import pytest

from batchgate.emulator.content import answer, fit, last_user_text, sentiment


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("I loved this film, the acting was great", "positive"),
        ("Terrible service and the food was awful", "negative"),
        ("The parcel arrived on Tuesday", "neutral"),
        ("It was not good at all", "negative"),
        ("Not bad, I would recommend it", "positive"),
    ],
)
def test_sentiment_labels(text: str, label: str) -> None:
    assert sentiment(text) == label


def test_sentiment_question_answers_one_label_about_the_text_after_the_colon() -> None:
    assert answer("Classify the sentiment of this review: what a wonderful day") == "positive"
    assert answer("What is the sentiment? The product broke after a week: useless") == "negative"


def test_summary_is_the_first_twelve_words_of_the_subject() -> None:
    text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    assert answer(f"Summarize this: {text}") == " ".join(text.split()[:12])


def test_anything_else_is_echoed() -> None:
    assert answer("Hello there, how are you today?") == "echo: Hello there, how are you today?"


def test_answers_are_deterministic() -> None:
    prompt = "Please summarise: the meeting moved to Thursday at noon in room four"
    assert answer(prompt) == answer(prompt)


def test_fit_cuts_by_whole_words_to_max_tokens() -> None:
    def count(text: str) -> int:
        return len(text.split())

    assert fit("a b c", 5, count) == ("a b c", 3, False)
    assert fit("a b c d e", 2, count) == ("a b", 2, True)


def test_last_user_text_skips_assistant_turns_and_joins_parts() -> None:
    messages: list[dict[str, object]] = [
        {"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "part"}]},
        {"role": "assistant", "content": "reply"},
    ]
    assert last_user_text(messages) == "first part"
