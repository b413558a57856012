"""Plan figures: tasks split over a route's targets by request quota, priced per model, and the
budget verdict — checked against numbers worked out by hand."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from batchgate.config import config_from_dict
from batchgate.jobs.plan import Plan, make_plan, render_plan
from batchgate.jobs.plan_limits import DEFAULT_P50_S
from batchgate.jobs.pricing import PriceTable
from batchgate.models import Usage
from batchgate.providers.base import make_token_counter


def _config(budget: dict[str, Any] | None = None) -> Any:
    data: dict[str, Any] = {
        "providers": [
            {"name": "a", "kind": "openai", "base_url": "http://127.0.0.1:1/v1", "limits": {"rpm": 300}},
            {"name": "b", "kind": "openai", "base_url": "http://127.0.0.1:2/v1", "limits": {"rpm": 100}},
        ],
        "routes": [{"model": "m", "targets": ["a:cheap", "b:dear"]}],
        "prices": {"cheap": {"input": 1.0, "output": 2.0}, "dear": {"input": 10.0, "output": 20.0}},
    }
    if budget:
        data["budget"] = budget
    return config_from_dict(data, source="test")


def _input(path: Path, n: int, model: str = "m") -> Path:
    lines = [
        {
            "custom_id": f"c{i}",
            "model": model,
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "hello"}],
        }
        for i in range(n)
    ]
    path.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    return path


def test_plan_splits_by_quota_and_prices_each_model(tmp_path: Path) -> None:
    config = _config()
    src = _input(tmp_path / "in.jsonl", 100)
    prompt = make_token_counter(config.provider("a")).count_prompt(
        {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    )
    plan = make_plan(config, src)
    assert plan["tasks"] == 100
    a, b = plan["providers"]["a"], plan["providers"]["b"]
    assert (a["requests"], b["requests"]) == (75, 25)  # rpm 300 : 100
    assert a["prompt_tokens"] == 75 * prompt
    assert b["max_output_tokens"] == 250
    assert a["cost_usd_max"] == pytest.approx(75 * (prompt * 1.0 + 10 * 2.0) / 1e6)
    assert b["cost_usd_max"] == pytest.approx(25 * (prompt * 10.0 + 10 * 20.0) / 1e6)
    # the route's batches go to its first target with a Batch API (a), all 100 tasks at half price
    assert a["batch_api_cost_usd_max"] == pytest.approx(100 * (prompt * 1.0 + 10 * 2.0) / 1e6 / 2)
    assert (a["batch_api_requests"], b["batch_api_requests"]) == (100, 0)
    assert b["batch_api_cost_usd_max"] is None  # b would get no batch: no $0.0000 for it
    assert a["quota_seconds"] == pytest.approx(15.0)  # 75 requests at 300 a minute
    assert plan["quota_seconds"] == pytest.approx(15.0)
    assert plan["budget_usd"] is None
    assert not plan["over_budget"]
    assert plan["unpriced_models"] == []
    text = render_plan(plan)
    assert "100 tasks" in text
    assert "budget" not in text


def test_plan_budget_verdicts(tmp_path: Path) -> None:
    src = _input(tmp_path / "in.jsonl", 100)
    assert make_plan(_config({"max_cost_usd": 1000.0}), src)["over_budget"] is False
    tight = make_plan(_config({"max_cost_usd": 0.0001}), src)
    assert tight["over_budget"] is True
    assert "OVER" in render_plan(tight)
    tokens = make_plan(_config({"max_tokens": 500}), src)
    assert tokens["over_budget"] is True
    assert "500 tokens" in render_plan(tokens)


def test_worst_case_takes_the_dearest_target() -> None:
    config = _config()
    prices = PriceTable(config.prices)
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    cost, tokens = prices.worst_case(config, body, prompt_tokens=100)
    billed = 100 + 4 + 3  # the estimate, plus the framing the provider bills: one message, the reply
    assert cost == pytest.approx((billed * 10.0 + 10 * 20.0) / 1e6)
    assert tokens == billed + 10
    assert prices.cost("dear-2024-01-01", Usage(prompt_tokens=1_000_000)) == pytest.approx(10.0)  # prefix
    assert prices.unpriced(["cheap", "other"]) == ["other"]


def test_plan_shows_each_route_mode_and_the_cost_both_ways(tmp_path: Path) -> None:
    data: dict[str, Any] = {
        "providers": [
            {"name": "a", "kind": "openai", "base_url": "http://127.0.0.1:1/v1", "limits": {"rpm": 300}},
            {"name": "local", "kind": "openai", "base_url": "http://127.0.0.1:2/v1", "batch_api": False},
        ],
        "routes": [
            {"model": "m", "targets": ["a:cheap"], "mode": "auto"},
            {"model": "n", "targets": ["local:cheap"], "mode": "auto"},
        ],
        "prices": {"cheap": {"input": 1.0, "output": 2.0, "batch_discount": 0.4}},
        "job": {"deadline_hours": 30, "batch_turnaround_hours": 24},
    }
    src = _input(tmp_path / "in.jsonl", 10)
    plan = make_plan(config_from_dict(data, source="test"), src)
    route = plan["routes"]["m"]
    assert (route["configured_mode"], route["mode"], route["batch_provider"]) == ("auto", "batch-api", "a")
    assert route["batch_api_cost_usd_max"] == pytest.approx(0.4 * route["cost_usd_max"])
    assert route["planned_cost_usd_max"] == route["batch_api_cost_usd_max"]
    assert plan["batch_api_saving_usd"] == pytest.approx(0.6 * route["cost_usd_max"], abs=1e-6)
    assert plan["planned_cost_usd_max"] == pytest.approx(route["batch_api_cost_usd_max"])
    assert "auto -> batch-api" in render_plan(plan)

    late = make_plan(config_from_dict({**data, "job": {"deadline_hours": 10}}, source="test"), src)
    assert late["routes"]["m"]["mode"] == "online"  # a batch might not end in time
    assert late["planned_cost_usd_max"] == pytest.approx(late["routes"]["m"]["cost_usd_max"])


def _sums_agree(plan: Plan) -> None:
    providers, routes = plan["providers"].values(), plan["routes"].values()
    assert sum(p["cost_usd_max"] for p in providers) == pytest.approx(plan["cost_usd_max"], abs=1e-5)
    assert sum(r["cost_usd_max"] for r in routes) == pytest.approx(plan["cost_usd_max"], abs=1e-5)
    batch = [r["batch_api_cost_usd_max"] for r in routes if r["batch_api_cost_usd_max"] is not None]
    assert sum(p["batch_api_cost_usd_max"] or 0.0 for p in providers) == pytest.approx(sum(batch), abs=1e-5)
    assert plan["batch_api_cost_usd_max"] == pytest.approx(sum(batch), abs=1e-5)
    rounding = len(providers)  # each row's tokens are rounded
    assert sum(p["prompt_tokens"] for p in providers) == pytest.approx(plan["prompt_tokens"], abs=rounding)
    assert sum(r["prompt_tokens"] for r in routes) == pytest.approx(plan["prompt_tokens"], abs=rounding)
    assert sum(r["tasks"] for r in routes) == plan["tasks"]


def test_plan_tables_add_up(tmp_path: Path) -> None:
    """The provider table and the route table are two views of the same sums (issue 13, item 7)."""
    data: dict[str, Any] = {
        "providers": [
            {"name": "a", "kind": "openai", "base_url": "http://127.0.0.1:1/v1", "limits": {"rpm": 300}},
            {"name": "b", "kind": "anthropic", "base_url": "http://127.0.0.1:2", "limits": {"rpm": 100}},
            {"name": "c", "kind": "openai", "base_url": "http://127.0.0.1:3/v1", "batch_api": False},
        ],
        "routes": [
            {"model": "m", "targets": ["a:cheap", "b:dear", "c:cheap"]},
            {"model": "n", "targets": ["b:dear", "a:cheap"]},
            {"model": "o", "targets": ["c:cheap"]},
        ],
        "prices": {"cheap": {"input": 1.0, "output": 2.0}, "dear": {"input": 10.0, "output": 20.0}},
    }
    config = config_from_dict(data, source="test")
    src = tmp_path / "in.jsonl"
    lines = [
        {"custom_id": f"c{i}", "model": "mno"[i % 3], "max_tokens": 5 + i % 7, "prompt": "word " * (i + 1)}
        for i in range(60)
    ]
    src.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    plan = make_plan(config, src)
    _sums_agree(plan)
    assert (
        plan["providers"]["b"]["batch_api_cost_usd_max"] or 0
    ) > 0  # route n batches at b, its first target


def test_plan_counts_each_target_with_its_own_counter(tmp_path: Path) -> None:
    """As the run does: each target's prompt counted by its own counter (here an exact encoding
    for one, the learning estimate for the other)."""
    data: dict[str, Any] = {
        "providers": [
            {"name": "a", "kind": "openai", "base_url": "http://127.0.0.1:1/v1", "limits": {"rpm": 100}},
            {"name": "g", "kind": "anthropic", "base_url": "http://127.0.0.1:2", "limits": {"rpm": 100}},
        ],
        "routes": [{"model": "m", "targets": ["a:x", "g:y"]}],
    }
    data["providers"][0]["tokenizer"] = "o200k_base"
    data["providers"][1]["tokenizer"] = "estimate"
    config = config_from_dict(data, source="test")
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "Zebras! " * 300}]}
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(orjson.dumps({"custom_id": f"c{i}", **body}) for i in range(10)) + b"\n")
    plan = make_plan(config, src)
    for name in ("a", "g"):
        one = make_token_counter(config.provider(name)).count_prompt(body)
        assert plan["providers"][name]["prompt_tokens"] == 5 * one, name
    assert plan["providers"]["a"]["prompt_tokens"] != plan["providers"]["g"]["prompt_tokens"]


def test_plan_says_which_limit_binds_first_and_suggests_a_concurrency(tmp_path: Path) -> None:
    lat = {"ttft_p50_ms": 800.0, "per_token_ms": 20.0}
    data: dict[str, Any] = {
        "providers": [
            {"name": "emu", "kind": "openai", "base_url": "emulator", "limits": {"rpm": 600, "tpm": 3000}},
            {"name": "far", "kind": "openai", "base_url": "http://127.0.0.1:2/v1", "limits": {"rpm": 60},
             "batch_api": False},
        ],
        "routes": [{"model": "m", "targets": ["emu:cheap"]}, {"model": "n", "targets": ["far:cheap"]}],
        "prices": {"cheap": {"input": 1.0, "output": 2.0}},
        "emulator": {"providers": [{"name": "emu", "family": "openai", "latency": lat}]},
    }  # fmt: skip
    config = config_from_dict(data, source="test")
    m, n = _input(tmp_path / "m.jsonl", 60).read_bytes(), _input(tmp_path / "n.jsonl", 30, "n").read_bytes()
    src = tmp_path / "in.jsonl"
    src.write_bytes(m + n.replace(b'"custom_id":"c', b'"custom_id":"n'))  # custom_ids n0..n29
    plan = make_plan(config, src)
    emu, far = plan["providers"]["emu"], plan["providers"]["far"]
    tokens = emu["prompt_tokens"] + emu["max_output_tokens"]
    assert emu["dimension_seconds"] == {"rpm": 6.0, "tpm": pytest.approx(tokens / 3000 * 60, abs=0.05)}
    assert emu["binding_limit"] == "tpm"  # 60 requests need 6 s, their tokens more
    assert emu["quota_seconds"] == emu["dimension_seconds"]["tpm"]
    assert (far["dimension_seconds"], far["binding_limit"]) == ({"rpm": 30.0}, "rpm")
    conc = emu["suggested_concurrency"]
    p50 = 0.8 + 0.02 * 10  # the emulator's P50 and 10 output tokens at 20 ms
    assert conc["p50_s"] == pytest.approx(p50)
    assert conc["p50_source"] == "emulator"
    assert conc["value"] == math.ceil(p50 * 600 / 60 * 1.2)  # 12
    assert far["suggested_concurrency"]["p50_source"] == "default"
    assert far["suggested_concurrency"]["value"] == math.ceil(DEFAULT_P50_S * 60 / 60 * 1.2)
    assert far["batch_api_cost_usd_max"] is None  # no Batch API: no batch column figure
    text = render_plan(plan)
    assert "tokens/min" in text
    assert "(binds first)" in text
    assert "× 600 RPM / 60 + 20% = 12.0 → 12" in text
    assert "(emulator)" in text
    assert "(default)" in text
    row = next(line for line in text.splitlines() if line.split()[:1] == ["far"])
    assert "0.0000" not in row


def test_plan_says_limits_nobody_declared_are_learned(tmp_path: Path) -> None:
    data: dict[str, Any] = {
        "providers": [
            {"name": "proxy", "kind": "openai", "base_url": "http://127.0.0.1:2/v1", "batch_api": False}
        ],
        "routes": [{"model": "m", "targets": ["proxy"]}],
    }
    plan = make_plan(config_from_dict(data, source="test"), _input(tmp_path / "m.jsonl", 5))
    assert plan["providers"]["proxy"]["limits"] == "learned"
    assert "learned from its answers' rate-limit headers" in render_plan(plan)
