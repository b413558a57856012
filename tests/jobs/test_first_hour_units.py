"""Unit tests of the pure pieces behind issue 13: request fields, body types, route fit, the
timer-driven beat and the paced progress lines, the display's texts."""

from __future__ import annotations

import io
from typing import Any

import pytest

from batchgate.body_types import field_type_problem
from batchgate.config import config_from_dict
from batchgate.jobs.fits import RouteFit, prompt_upper_bound
from batchgate.jobs.input.shapes import ShapeError, normalise
from batchgate.jobs.progress.live_display import (
    budget_text,
    fmt_duration,
    head_lines,
    provider_row,
    quota_text,
)
from batchgate.jobs.progress.progress_lines import LineSink
from batchgate.jobs.progress.shapes import ProviderRow, Snapshot
from batchgate.providers.base import make_token_counter
from batchgate.request_fields import split_request
from batchgate.stats import ProviderRecorder
from batchgate.text import plural


def test_split_request_takes_batchgates_own_fields_off() -> None:
    body = {"custom_id": "a", "model": "m", "messages": []}
    assert split_request(body) == ("a", {"model": "m", "messages": []})
    assert body["custom_id"] == "a"  # the caller's dict is left alone
    plain = {"model": "m"}
    assert split_request(plain) == (None, plain)
    assert split_request({"custom_id": 5, "model": "m"}) == (None, {"model": "m"})


def test_every_input_shape_drops_custom_id_from_the_body() -> None:
    messages = [{"role": "user", "content": "hi"}]
    batch = {"custom_id": "x", "method": "POST", "url": "/v1/chat/completions",
             "body": {"custom_id": "x", "model": "m", "messages": messages}}  # fmt: skip
    for line in (batch, {"custom_id": "x", "model": "m", "messages": messages}):
        custom_id, body = normalise(line, 1)
        assert custom_id == "x"
        assert "custom_id" not in body


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("max_tokens", "5", "max_tokens must be an integer, got a string ('5')"),
        ("max_tokens", 0, "max_tokens must be an integer >= 1, got a number (0)"),
        ("max_tokens", True, "max_tokens must be an integer, got a boolean (True)"),
        ("temperature", "hot", "temperature must be a number, got a string ('hot')"),
        ("temperature", 3, "temperature must be a number from 0 to 2, got a number (3)"),
        ("n", 1.5, "n must be an integer, got a number (1.5)"),
        ("stop", [1], "stop must be a string or an array of strings, got an array (an array)"),
        ("response_format", "json", "response_format must be an object, got a string ('json')"),
    ],
)
def test_field_types(field: str, value: Any, reason: str) -> None:
    assert field_type_problem({"model": "m", field: value}) == reason
    with pytest.raises(ShapeError, match="must be"):
        normalise({"model": "m", "messages": [{"role": "user", "content": "x"}], field: value}, 1)


def test_good_field_types_pass() -> None:
    body = {"max_tokens": 5, "temperature": 0.5, "n": 2, "stop": ["\n"], "seed": 3, "tools": []}
    assert field_type_problem(body) is None


def _fit_config() -> Any:
    return config_from_dict(
        {
            "providers": [
                {"name": "a", "kind": "openai", "base_url": "http://127.0.0.1:1/v1", "limits": {"tpm": 1000}},
                {"name": "g", "kind": "anthropic", "base_url": "http://127.0.0.1:2", "limits": {"itpm": 100}},
            ],
            "routes": [{"model": "m", "targets": ["a", "g"]}, {"model": "solo", "targets": ["g"]}],
        },
        source="test",
    )


def _body(model: str, words: int) -> dict[str, Any]:
    return {"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "word " * words}]}


def test_route_fit_refuses_only_what_no_target_admits() -> None:
    config = _fit_config()
    fit = RouteFit(config)
    assert fit.problem(_body("m", 10)) is None
    assert fit.problem(_body("m", 300)) is None  # too big for g, fine for a
    too_big = fit.problem(_body("m", 3000))
    assert too_big is not None
    assert "a needs" in too_big
    assert "(tpm)" in too_big
    assert "g needs" in too_big
    assert "(itpm)" in too_big
    assert fit.problem(_body("solo", 300)) is not None
    assert fit.problem(_body("unknown", 3000)) is None  # reported as an unknown model elsewhere


def test_the_byte_bound_is_never_below_any_counter() -> None:
    config = _fit_config()
    for words in (0, 1, 7, 300):
        messages = [{"role": "system", "content": "é" * words}, {"role": "user", "content": "x y"}]
        body = _body("m", words) | {"messages": messages}
        bound = prompt_upper_bound(body)
        for p in config.providers:
            assert make_token_counter(p).count_prompt(body) <= bound


def _snap(elapsed: float) -> Snapshot:
    return {
        "elapsed_s": elapsed, "done": 3, "total": 10, "succeeded": 2, "failed": 1, "pending": 7,
        "rate_per_s": 1.5, "eta_s": 5.0, "in_flight": 1, "waiting": 2, "waiting_for": {"alpha": 2},
        "backing_off": 1, "retries": 4, "rate_limited": 0, "errors_by_kind": {"unreachable": 4},
        "tokens": 10, "cost_usd": 0.5, "budget": {"spent_usd": 0.5, "max_usd": 2.0, "spent_tokens": 10,
        "max_tokens": None}, "unreachable": ["beta unreachable: connection refused, 4 attempts"],
        "providers": {},
    }  # fmt: skip


def test_line_sink_writes_at_a_steady_pace_from_the_snapshots_clock() -> None:
    out = io.StringIO()
    sink = LineSink(10.0, out)
    for tick in range(1, 51):  # snapshots every 0.5 s for 25 s
        sink.update(_snap(tick * 0.5))
    lines = out.getvalue().splitlines()
    assert [line.split(":")[1].strip() for line in lines] == ["10s", "20s"]
    assert "beta unreachable: connection refused, 4 attempts" in lines[0]
    assert "2 waiting for quota (queued at alpha 2)" in lines[0]
    assert "budget $0.5000 of $2.00 (25%)" in lines[0]


def test_display_texts() -> None:
    assert [fmt_duration(s) for s in (None, 5, 65, 3725)] == ["--", "5s", "1m05s", "1h02m"]
    assert budget_text(None) == ""
    assert quota_text({"requests": 0.1, "input_tokens": 0.93}) == "input tok 93%"
    assert quota_text({"requests": 0.4}, learned=True) == "requests 40% learned"  # none declared
    assert quota_text({}, learned=True) == "learning"
    head = "\n".join(head_lines(_snap(42)))
    for part in ("elapsed 42s", "retries 4", "errors: unreachable 4", "budget $0.5000 of $2.00"):
        assert part in head
    row = provider_row(
        "beta",
        {"state": "unreachable", "requests": 4, "ok": 0, "errors": 4, "retries": 4, "rate_limited": 0,
         "in_flight": 0, "waiting": 2, "quota_used": {"tokens": 0.5}, "p50_ms": 1, "p95_ms": 3,
         "tokens": 0, "cost_usd": 0.0},
    )  # fmt: skip
    assert row[:2] == ["beta", "unreachable"]
    fields: ProviderRow = {
        "requests": 4,
        "ok": 0,
        "errors": 4,
        "rate_limited": 0,
        "in_flight": 0,
        "p50_ms": 1,
    }
    opened = provider_row("beta", {"state": "unreachable", "circuit": "open", "tokens": 0, **fields})
    assert opened[1] == "unreachable, circuit open"
    assert "tokens 50%" in row


def test_recorder_tracks_reachability() -> None:
    rec = ProviderRecorder("beta")
    rec.record_unreachable("connection refused")
    rec.record_failure("unreachable", 1.0, 0)
    snap = rec.snapshot()
    assert (snap.unreachable, snap.unreachable_attempts, snap.unreachable_cause) == (
        True,
        1,
        "connection refused",
    )
    rec.record_failure("server_error", 1.0, 0)  # it answered
    assert rec.snapshot().unreachable is False
    assert rec.snapshot().unreachable_attempts == 1


def test_plural() -> None:
    assert [plural(n, "result") for n in (0, 1, 2)] == ["0 results", "1 result", "2 results"]
    assert plural(1, "invalid line") == "1 invalid line"
