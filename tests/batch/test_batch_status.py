"""Unit tests of the status mapping and of the result lines of both providers."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.providers.batch.anthropic import anthropic_item_result, anthropic_status
from batchgate.providers.batch.common import BatchCounts
from batchgate.providers.batch.openai import openai_item_result, openai_status

CHAT_BODY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
}


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("validating", "in_progress"),
        ("in_progress", "in_progress"),
        ("finalizing", "in_progress"),
        ("cancelling", "in_progress"),
        ("completed", "completed"),
        ("expired", "expired"),
        ("cancelled", "cancelled"),
        ("failed", "failed"),
    ],
)
def test_openai_status_mapping(status: str, state: str) -> None:
    raw = {"status": status, "request_counts": {"total": 10, "completed": 6, "failed": 1}}
    result = openai_status(raw)
    assert result.state == state
    assert result.done == (state != "in_progress")
    processing = 3 if state == "in_progress" else 0
    assert result.counts == BatchCounts(total=10, processing=processing, succeeded=6, errored=1)
    assert result.raw is raw


def test_openai_status_unknown_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown batch status"):
        openai_status({"status": "pondering"})


def _anthropic(status: str, cancel: str | None = None, **counts: int) -> dict[str, Any]:
    base = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    return {"processing_status": status, "cancel_initiated_at": cancel, "request_counts": {**base, **counts}}


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        (_anthropic("in_progress", processing=5), "in_progress"),
        (_anthropic("canceling", "2026-01-01T00:00:00Z", processing=5), "in_progress"),
        (_anthropic("ended", succeeded=4, errored=1), "completed"),
        (_anthropic("ended", succeeded=3, expired=2), "expired"),
        (_anthropic("ended", "2026-01-01T00:00:00Z", succeeded=2, canceled=3), "cancelled"),
    ],
)
def test_anthropic_status_mapping(raw: dict[str, Any], state: str) -> None:
    status = anthropic_status(raw)
    assert status.state == state
    assert status.counts.total == 5


def test_anthropic_counts_and_unknown_status() -> None:
    counts = anthropic_status(_anthropic("ended", succeeded=2, errored=1, canceled=3, expired=4)).counts
    assert counts == BatchCounts(total=10, processing=0, succeeded=2, errored=1, cancelled=3, expired=4)
    with pytest.raises(ValueError, match="processing_status"):
        anthropic_status({"processing_status": "done"})


def test_openai_lines() -> None:
    ok = openai_item_result(
        {
            "custom_id": "a",
            "response": {"status_code": 200, "request_id": "r", "body": CHAT_BODY},
            "error": None,
        }
    )
    assert ok.ok
    assert ok.body == CHAT_BODY
    assert ok.usage is not None
    assert ok.usage.total_tokens == 9
    bad_body = {
        "error": {"message": "bad temp", "type": "invalid_request_error", "code": "decimal_out_of_range"}
    }
    refused = openai_item_result(
        {"custom_id": "b", "response": {"status_code": 400, "body": bad_body}, "error": None}
    )
    assert not refused.ok
    assert refused.status_code == 400
    assert refused.error is not None
    assert refused.error.to_dict() == {"code": "decimal_out_of_range", "message": "bad temp"}
    expired = openai_item_result(
        {"custom_id": "c", "response": None, "error": {"code": "batch_expired", "message": "late"}}
    )
    assert (expired.ok, expired.error and expired.error.code) == (False, "batch_expired")
    with pytest.raises(ValueError, match="neither"):
        openai_item_result({"custom_id": "d", "response": None, "error": None})


def test_anthropic_lines_are_normalised_to_chat_completions() -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "text", "text": "positive"}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 11, "output_tokens": 1, "cache_read_input_tokens": 4},
    }
    ok = anthropic_item_result({"custom_id": "a", "result": {"type": "succeeded", "message": message}}, 0)
    assert ok.ok
    assert ok.body is not None
    assert ok.body["object"] == "chat.completion"
    assert ok.body["choices"][0]["message"]["content"] == "positive"
    assert ok.body["choices"][0]["finish_reason"] == "length"
    assert ok.usage is not None
    assert (ok.usage.prompt_tokens, ok.usage.completion_tokens, ok.usage.cached_tokens) == (15, 1, 4)
    errored = anthropic_item_result(
        {
            "custom_id": "b",
            "result": {
                "type": "errored",
                "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}},
            },
        },
        0,
    )
    assert errored.error is not None
    assert (errored.ok, errored.error.code, errored.error.message) == (False, "invalid_request_error", "no")
    codes = [
        anthropic_item_result({"custom_id": "c", "result": {"type": kind}}, 0).error
        for kind in ("canceled", "expired")
    ]
    assert [e.code if e else None for e in codes] == ["batch_cancelled", "batch_expired"]
    with pytest.raises(ValueError, match="unknown result type"):
        anthropic_item_result({"custom_id": "d", "result": {"type": "vanished"}}, 0)
