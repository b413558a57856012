"""Money is never silent, in the library and `serve` (issue 30): the built-in price table under
the config's `prices:`, a warning for a model without a price when a `Job` is made or a server
starts, and an error under a money budget unless allowed (`allow_unpriced`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from batchgate import Job
from batchgate.cli.serve import _warn_unpriced
from batchgate.config import GatewayConfig, Price, config_from_dict
from batchgate.errors import ConfigError
from batchgate.jobs.pricing import BUILTIN_DATE, PriceTable, price_notes
from batchgate.models import Usage

URL = "http://127.0.0.1:9/v1"
MILLION = Usage(prompt_tokens=1_000_000)


def _config(prices: dict[str, Any], budget: dict[str, Any] | None = None) -> GatewayConfig:
    return config_from_dict(
        {
            "providers": [{"name": "p", "base_url": URL}],
            "routes": [{"model": "m", "targets": ["p:gpt-4o-mini-2024-07-18", "p:ft-reviews"]}],
            "prices": prices,
            "budget": budget or {},
        },
        source="gw.yaml",
    )


def test_the_config_overrides_the_built_in_table() -> None:
    table = PriceTable({"gpt-4o": Price(input=9.0, output=9.0)})
    assert table.cost("gpt-4o-2024-08-06", MILLION) == pytest.approx(9.0)  # the config's, by prefix
    assert not table.from_builtin("gpt-4o-2024-08-06")
    assert table.cost("claude-3-5-haiku-latest", MILLION) == pytest.approx(0.80)
    assert table.from_builtin("claude-3-5-haiku-20241022")
    assert PriceTable({}).price("gpt-4o-audio-preview") is None  # only a date or -latest extends a built-in
    assert PriceTable({}, builtin=False).price("gpt-4o-mini") is None
    assert price_notes(_config({})) == {
        "gpt-4o-mini-2024-07-18": f"price from the built-in table of {BUILTIN_DATE}"
    }


def test_a_job_warns_of_a_model_without_a_price(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match=r"no price for ft-reviews: their spend counts as \$0"):
        Job(tmp_path / "in.jsonl", config=_config({}), output=tmp_path / "out.jsonl")


def test_a_job_with_a_money_budget_refuses_an_unpriced_model(tmp_path: Path) -> None:
    args: dict[str, Any] = {"config": _config({}), "output": tmp_path / "out.jsonl", "budget_usd": 1.0}
    with pytest.raises(ConfigError, match=r"no price for ft-reviews, so budget\.max_cost_usd could never"):
        Job(tmp_path / "in.jsonl", **args)
    with pytest.warns(UserWarning, match="no price for ft-reviews"):
        job = Job(tmp_path / "in.jsonl", **args, allow_unpriced=True)
    assert job.request.allow_unpriced
    allowed = _config({}, budget={"max_cost_usd": 1.0, "allow_unpriced": True})
    with pytest.warns(UserWarning, match="no price for ft-reviews"):
        Job(tmp_path / "in.jsonl", config=allowed, output=tmp_path / "out.jsonl", budget_usd=2.0)


def test_serve_says_it_at_the_start(capsys: pytest.CaptureFixture[str]) -> None:
    _warn_unpriced(_config({}))
    assert capsys.readouterr().err.startswith("batchgate: warning: no price for ft-reviews:")
    _warn_unpriced(_config({"ft-reviews": {"input": 1.0, "output": 1.0}}))
    assert capsys.readouterr().err == ""
    with pytest.raises(ConfigError, match=r"budget\.max_cost_usd could never stop"):
        _warn_unpriced(_config({}, budget={"max_cost_usd": 5.0}))
