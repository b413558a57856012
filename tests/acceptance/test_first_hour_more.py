"""A new user's first hour (issue 13, items 6-10), the CLI as a subprocess against the emulator.

6. A request no target of its route can admit is refused at validation and in `plan`, naming
   every limit; one that fits some targets runs on those only.
7. `plan`'s provider and route tables add up.
8. Body field types are checked before anything is sent; messages in input order; plurals.
9. --version, -q, `report` defaults / prefixes / -o, lock files removed, skipped lines counted.
10. The live display shows elapsed time, retries, errors by kind, p95, budget, quota, state.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from batchgate.emulator import EmulatorThread

from .harness import (
    MODEL,
    Cli,
    gateway_config,
    input_line,
    one_error_line,
    provider_totals,
    read_jsonl,
    write_input,
)

pytestmark = pytest.mark.acceptance
ROOT = Path(__file__).resolve().parents[2]


def limited_config(path: Path, emu: EmulatorThread) -> Path:
    """MODEL over alpha (tpm 150,000) and gamma (itpm 5,000), as declared in the gateway config."""
    gateway_config(path, emu)
    data = yaml.safe_load(path.read_text())
    data["providers"][0]["limits"] = {"rpm": 10_000, "tpm": 150_000}
    data["providers"][1]["limits"] = {"rpm": 10_000, "itpm": 5_000, "otpm": 5_000}
    path.write_text(yaml.safe_dump(data))
    return path


def big_line(cid: str, words: int) -> dict[str, Any]:
    text = "Summarise: " + "word " * words
    messages = [{"role": "user", "content": text}]
    return {"custom_id": cid, "model": MODEL, "max_tokens": 5, "messages": messages}


@pytest.mark.slow  # several CLI runs
def test_a_request_no_target_admits_is_refused_before_sending(cli: Cli, emu: EmulatorThread) -> None:
    cfg = limited_config(cli.cwd / "gw.yaml", emu)
    src = cli.cwd / "in.jsonl"
    # ~6,000 tokens (counted ~7,500 where estimated): too many for gamma, not for alpha;
    # ~200,000: too many for both
    lines = [big_line(f"fits-alpha-{i}", 6_000) for i in range(3)] + [big_line("too-big", 200_000)]
    src.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out))
    assert done.returncode == 2
    error = one_error_line(done.stderr)
    assert "in.jsonl:4: request can never be admitted by any target of route 'm-test'" in error
    assert re.search(r"alpha needs \d+ tokens, allows at most 150000 per minute \(tpm\)", error)
    assert re.search(r"gamma needs \d+ input tokens, allows at most 5000 per minute \(itpm\)", error)
    plan = cli.run("plan", str(src), "--config", str(cfg), store=False)
    assert plan.returncode == 2
    assert "in.jsonl:4: request can never be admitted" in one_error_line(plan.stderr)
    assert provider_totals(emu)["admitted"] == 0

    # without it, the others (each too big for gamma) run on alpha only
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--skip-invalid", "-q")
    assert done.returncode == 0, done.stderr
    assert {r["provider"] for r in read_jsonl(out)} == {"alpha"}
    assert emu.stats()["providers"]["gamma"]["admitted"] == 0
    report = cli.report(cli.status()["job"])
    assert report["skipped_invalid_lines"] == 1  # item 9: counted in the report


def _sums(plan: dict[str, Any]) -> None:
    providers, routes = plan["providers"].values(), plan["routes"].values()
    assert sum(p["cost_usd_max"] for p in providers) == pytest.approx(plan["cost_usd_max"], abs=1e-5)
    assert sum(r["cost_usd_max"] for r in routes) == pytest.approx(plan["cost_usd_max"], abs=1e-5)
    batch_routes = sum(r["batch_api_cost_usd_max"] or 0.0 for r in routes)
    assert sum(p["batch_api_cost_usd_max"] or 0.0 for p in providers) == pytest.approx(batch_routes, abs=1e-5)
    assert plan["batch_api_cost_usd_max"] == pytest.approx(batch_routes, abs=1e-5)


def test_plan_tables_add_up_for_the_readme_job(cli: Cli) -> None:
    src, cfg = ROOT / "examples" / "reviews.jsonl", ROOT / "examples" / "batchgate.yaml"
    done = cli.run("plan", str(src), "--config", str(cfg), "--json", store=False)
    assert done.returncode == 0, done.stderr
    _sums(orjson.loads(done.stdout))


@pytest.mark.slow  # several CLI runs
def test_wrong_field_types_are_refused_in_order_with_plurals(cli: Cli, emu: EmulatorThread) -> None:
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    rows = [input_line(i) for i in range(6)]
    rows[1]["params"]["max_tokens"] = "5"
    rows[3]["body"]["temperature"] = "hot"
    rows[5]["n"] = 1.5
    src = cli.cwd / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    problems = [line for line in done.stderr.splitlines() if re.search(r"in\.jsonl:\d+: ", line)]
    assert [int(re.search(r"in\.jsonl:(\d+):", p).group(1)) for p in problems] == [2, 4, 6]  # type: ignore[union-attr]
    assert "in.jsonl:2: max_tokens must be an integer, got a string ('5')" in done.stderr
    assert "3 invalid lines in all; nothing was sent" in done.stderr
    assert provider_totals(emu)["admitted"] == 0

    rows = [input_line(0), {**input_line(1), "params": {**input_line(1)["params"], "max_tokens": "5"}}]
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out))
    assert "1 invalid line in all" in one_error_line(done.stderr)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--skip-invalid", "-q")
    assert done.returncode == 0, done.stderr
    assert f"wrote 1 result to {out}" in done.stdout


@pytest.mark.slow  # several CLI runs
def test_rough_edges(cli: Cli, emu: EmulatorThread) -> None:
    version = cli.run("--version", store=False)
    assert version.returncode == 0
    assert re.match(r"batchgate \d+\.\d+", version.stdout)
    helptext = cli.run("run", "--help", store=False).stdout
    assert re.search(r"-q, --quiet\s+no live display and no summary", helptext)

    src = write_input(cli.cwd / "in.jsonl", 3)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
    assert done.returncode == 0, done.stderr
    assert "succeeded" not in done.stderr  # -q: no summary table
    assert not list(cli.store.parent.glob("*.lock"))  # the run's lock file went with it

    job = cli.status()["job"]
    latest = cli.run("report")
    assert latest.returncode == 0, latest.stderr
    assert orjson.loads(latest.stdout)["batch_id"] == job
    by_prefix = cli.run("report", job[:7], "--summary")
    assert by_prefix.stdout.startswith(f"job {job}: completed")
    saved = cli.run("report", job[:9], "-o", str(cli.cwd / "r.json"))
    assert saved.returncode == 0, saved.stderr
    assert orjson.loads((cli.cwd / "r.json").read_bytes())["batch_id"] == job

    # a run refused at validation (the input changed and broke) leaves no lock file either
    src.write_bytes(src.read_bytes() + b"{not json\n")
    refused = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--allow-changed-input")
    assert refused.returncode == 2
    assert not list(cli.store.parent.glob("*.lock"))


@pytest.mark.slow
def test_live_display_shows_what_a_run_is_doing(cli: Cli, emu: EmulatorThread) -> None:
    src = write_input(cli.cwd / "in.jsonl", 40)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu, budget={"max_cost_usd": 1.0})
    out = cli.cwd / "out.jsonl"
    cli.env["COLUMNS"] = "160"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "rich")
    assert done.returncode == 0, done.stderr
    text = done.stderr
    assert re.search(r"elapsed \d+s", text)
    assert re.search(r"retries \d+", text)
    assert "errors: " in text
    assert re.search(r"budget \$\d+\.\d{4} of \$1\.00 \(\d+%\)", text)
    assert re.search(r"p95 ms", text)
    assert "quota used" in text
    assert re.search(r"alpha\s+ok\s", text)  # its state
    bar = max((line for line in text.splitlines() if "━" in line), key=len)
    assert len(bar.strip()) > 120  # the bar spans the 160-column terminal, not 60 columns
