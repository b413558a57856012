"""Money is never silent (issue 30): a model without a price is a warning at the start, an error
under a money budget (`--allow-unpriced` to run anyway), a price no route uses is refused like an
unknown key, and common models are priced by a built-in table the report names with its date."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from batchgate.emulator import EmulatorThread
from batchgate.jobs.pricing import BUILTIN_DATE

from .harness import Cli, gateway_config, one_error_line, provider_totals, write_input

pytestmark = pytest.mark.acceptance

BUILTIN = f"price from the built-in table of {BUILTIN_DATE}"


def _config(
    cli: Cli, emu: EmulatorThread, prices: dict[str, Any], budget: dict[str, Any] | None = None
) -> Path:
    """The harness config with gamma serving a fine-tuned model no table knows (`ft-reviews`)."""
    path = gateway_config(cli.cwd / "gw.yaml", emu, budget=budget)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["routes"][0]["targets"] = ["alpha:gpt-4o-mini", "gamma:ft-reviews"]
    data["prices"] = prices
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _run(cli: Cli, cfg: Path, *extra: str) -> tuple[int, str]:
    src = write_input(cli.cwd / "in.jsonl", 6)
    done = cli.run(
        "run", str(src), "--config", str(cfg), "--output", "out.jsonl", "--progress", "quiet", *extra
    )
    return done.returncode, done.stderr


@pytest.mark.slow
def test_a_model_without_a_price_is_a_warning_at_the_start(cli: Cli, emu: EmulatorThread) -> None:
    code, err = _run(cli, _config(cli, emu, prices={}))
    assert code == 0, err
    assert err.splitlines()[0] == (
        "warning: no price for ft-reviews: their spend counts as $0 (add them under prices: in "
        f"{cli.cwd / 'gw.yaml'})"
    ), err
    assert f"  {BUILTIN}: gpt-4o-mini" in err  # the summary says which prices were not the config's
    report = cli.report(cli.status()["job"])
    assert report["prices"] == {"gpt-4o-mini": BUILTIN}
    assert report["cost_usd"] > 0  # alpha's answers: no price in the config, yet not free


@pytest.mark.slow
def test_under_a_money_budget_an_unpriced_model_is_an_error(cli: Cli, emu: EmulatorThread) -> None:
    cfg = _config(cli, emu, prices={}, budget={"max_cost_usd": 1.0})
    code, err = _run(cli, cfg)
    assert code == 2
    line = one_error_line(err)
    assert "gw.yaml: prices: no price for ft-reviews, so budget.max_cost_usd could never stop" in line
    assert "--allow-unpriced" in line
    assert provider_totals(emu)["admitted"] == 0
    assert not cli.store.exists()
    code, err = _run(cli, cfg, "--allow-unpriced")
    assert code == 0, err
    assert "warning: no price for ft-reviews" in err


def test_a_price_no_route_uses_is_refused(cli: Cli, emu: EmulatorThread) -> None:
    typo = {"ft-reveiws": {"input": 1.0, "output": 2.0}}  # meant ft-reviews
    code, err = _run(cli, _config(cli, emu, prices=typo))
    assert code == 2
    line = one_error_line(err)
    assert "gw.yaml: prices.ft-reveiws: no route sends to this model" in line, line
    assert "(they send to: ft-reviews, gpt-4o-mini)" in line
    assert provider_totals(emu)["admitted"] == 0


def test_plan_says_the_same(cli: Cli, emu: EmulatorThread) -> None:
    src = write_input(cli.cwd / "in.jsonl", 6)
    done = cli.run("plan", str(src), "--config", str(_config(cli, emu, prices={})), store=False)
    assert done.returncode == 0, done.stderr
    assert f"  {BUILTIN}: gpt-4o-mini" in done.stdout
    assert "  warning: no price for ft-reviews: their spend counts as $0" in done.stdout
