"""The live display at 80 and 200 columns (issue 30): rendered by rich into a string, no line is
wider than the terminal, nothing is wrapped mid-word or cut to `prov…`, the key columns (provider,
state, requests, ok, errors) are whole at 80 and every column is there at 200."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from batchgate.jobs.progress.live_display import PROVIDER_COLUMNS, fit_columns, fit_line, render
from batchgate.jobs.progress.shapes import ProviderRow, Snapshot

KEY_COLUMNS = ("provider", "state", "requests", "ok", "errors")


def _provider(requests: int, state: str = "ok", circuit: str = "closed") -> ProviderRow:
    return {
        "state": state, "circuit": circuit, "requests": requests, "ok": requests - 17, "errors": 17,
        "retries": 23, "rate_limited": 1204, "in_flight": 256, "waiting": 1043,
        "quota_used": {"output_tokens": 0.97, "requests": 0.4}, "p50_ms": 1234.0, "p95_ms": 98765.0,
        "tokens": 123456789, "cost_usd": 1234.5678,
    }  # fmt: skip


def _snap() -> Snapshot:
    """A busy run with wide figures everywhere: three providers, one unreachable, a budget."""
    return {
        "total": 1_000_000, "done": 456_789, "succeeded": 456_001, "failed": 788, "pending": 543_211,
        "elapsed_s": 7_384.0, "rate_per_s": 61.9, "eta_s": 8_777.0, "in_flight": 768, "waiting": 3120,
        "backing_off": 12, "waiting_for": {"anthropic-prod": 1043, "openai-main": 2077},
        "tokens": 370_370_367, "cost_usd": 3703.7034, "retries": 69, "rate_limited": 3612,
        "errors_by_kind": {"server_error": 412, "timeout": 301, "overloaded": 75, "connection": 3},
        "budget": {"spent_usd": 3703.7034, "max_usd": 5000.0, "spent_tokens": 370_370_367,
                   "max_tokens": 500_000_000},
        "unreachable": ["openai-backup unreachable: connection refused, 12 attempts"],
        "providers": {
            "anthropic-prod": _provider(150_000),
            "openai-backup": _provider(9_999, "unreachable", "half_open"),
            "openai-main": _provider(300_000, "circuit open", "open"),
        },
    }  # fmt: skip


def _rendered(width: int) -> list[str]:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, force_terminal=False, legacy_windows=False)
    console.print(render(_snap(), width))
    return out.getvalue().splitlines()


@pytest.mark.parametrize("width", [80, 200])
def test_no_line_is_wider_than_the_terminal_and_nothing_is_cut(width: int) -> None:
    lines = _rendered(width)
    assert all(len(line) <= width for line in lines), "\n".join(lines)
    text = "\n".join(lines)
    assert "…" not in text, text
    header = next(line for line in lines if line.startswith("provider"))
    for col in KEY_COLUMNS:
        assert f" {col} " in f" {header} ", header
    for name in ("anthropic-prod", "openai-backup", "openai-main"):
        assert any(line.startswith(f"{name} ") for line in lines), text
    assert "unreachable, circuit half-open" in text
    # the head lines: each figure whole on one line (broken between parts, never inside one)
    for figure in ("456789/1000000 done", "ETA 2h26m", "$3703.7034 of $5000.00 (74%)",
                   "openai-backup unreachable: connection refused, 12 attempts"):  # fmt: skip
        assert any(figure in line for line in lines), (figure, text)


def test_at_200_columns_every_column_is_shown() -> None:
    header = next(line for line in _rendered(200) if line.startswith("provider"))
    for col in PROVIDER_COLUMNS:
        assert col in header, header


def test_columns_go_by_priority_and_the_key_ones_stay() -> None:
    rows = [["a-very-long-provider-name", "unreachable, circuit half-open", *["123456"] * 12]]
    for width in (30, 60, 80, 120):
        shown = [PROVIDER_COLUMNS[i] for i in fit_columns(rows, width)]
        assert shown[:2] == ["provider", "state"]
        widths = [max(len(c), len(rows[0][PROVIDER_COLUMNS.index(c)])) for c in shown]
        assert sum(widths) + 2 * (len(shown) - 1) <= width or len(shown) == 2
    assert len(fit_columns(rows, 500)) == len(PROVIDER_COLUMNS)


def test_a_line_breaks_between_its_parts() -> None:
    line = "in flight 768  ·  waiting for quota 3120 (queued at a 1, b 2)  ·  retry backoff 12"
    assert fit_line(line, 80) == [
        "in flight 768  ·  waiting for quota 3120 (queued at a 1, b 2)",
        "retry backoff 12",
    ]
    assert fit_line(line, 200) == [line]
    assert all(len(piece) <= 20 for piece in fit_line(line, 20))
