"""The quota matrix's rows from issue 39: Anthropic's OTPM at real latency (two bucket depths), the
tier that halves for 10 s (`shift`) and the colleague row at 0.5 s latency. The cells are built
here and listed by `quota_cells.Builder.matrix`.

*Anthropic at latency*: the issue's key scaled to the matrix's size. Answers of 20-60 tokens
(echoed words of random length), `max_tokens` 300 (5-15× the answer), latency 0.5 s p50 (σ 0.4)
+ 4 ms per output token; ITPM binds, the output actually produced almost (0.95), and the output
held in flight (~5 s of OTPM) fits the provider's output bucket — a few seconds deep (8 s: limits
enforced over short intervals) or the whole minute. The provider adjusts the output charge to the
real output when the answer ends and its headers count every request in flight at its
`max_tokens` (shared/PROTOCOLS.md, "Anthropic output tokens at real latency"; Anthropic's
rate-limit docs). A client that keeps `max_tokens` charged, or lets one second of output be held
in flight, runs at a fifth of the key.

*Shift*: one OpenAI-style provider whose tier halves from 5 s to 15 s (emulator time), its
headers reporting the new limits at once (`limit_changes`); pace over what the tier left.

*Colleague at 0.5 s latency*: the matrix's colleague row (half the key taken silently from 5 s to
15 s, the headers' limits unchanged) against a provider answering in 0.5 s p50 instead of 0.3 s,
so what its headers report of the level is older by the time it arrives (issue 39: back to ≥ 95%
of the key within 3 s of the capacity returning, ≤ 1.5% 429s, "under a 0.5 s-latency provider").
"""

from __future__ import annotations

import random
import statistics

from quota_cells import LATENCY, Builder, Cell, _bound, _limits, _nice, _provider, _totals
from workload import Request

ANSWER_WORDS = 11  # echoed words of 4-16 letters: 20-60 tokens with "echo" and the index
PROMPT_BYTES = 270  # ~80 input tokens at 3.5 bytes a token
HELD_MAX_TOKENS = 300
ANTHROPIC_LATENCY = {"ttft_p50_ms": 500, "ttft_sigma": 0.4, "per_token_ms": 4}
SHIFT = {"from": 5.0, "until": 15.0, "share": 0.5}  # half the tier, from 5 s to 15 s
COLLEAGUE_TTFT_MS = 500  # the colleague row at 0.5 s latency (the matrix's alpha answers in 0.3 s)


def echo_requests(n: int, seed: int = 39) -> list[Request]:
    """`n` unique prompts whose echoed answers are 20-60 tokens, `max_tokens` 300."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        width = rng.randint(4, 16)
        prompt = f"echo {i:05d} " + " ".join("w" * width for _ in range(ANSWER_WORDS - 1))
        prompt += " " + "p" * max(1, PROMPT_BYTES - len(prompt) - 1)
        out.append(Request(f"item-{i:07d}-gamma", "gamma", "Repeat the words.", prompt, HELD_MAX_TOKENS))
    return out


def otpm_at_latency(b: Builder, depth: float) -> Cell:
    """The issue's Anthropic key at `depth` seconds of bucket (see the module docstring)."""
    reqs = echo_requests(b.items_one)
    exact = _totals(b.charger, "anthropic", reqs, "exact")
    replies = sum(b.charger.cost("anthropic", r)[2] for r in reqs)
    per_min = lambda total, share: _nice(total / (b.target * share) * 60.0)  # noqa: E731
    limits = {
        "rpm": per_min(exact["requests"], 0.1),
        "itpm": per_min(exact["input_tokens"], 1.0),
        "otpm": per_min(replies, 0.95),
    }
    entry = _provider("gamma", limits, "token_bucket", "exact", "minute")
    entry["enforcement"] = {"kind": "token_bucket", "burst_seconds": depth}
    entry["latency"] = ANTHROPIC_LATENCY
    entry["output_charge"] = "adjusted"
    name = f"anthropic otpm · 0.5 s latency · max_tokens 5-15× · {depth:g} s bucket"
    cell = Cell(name, [entry], {"gamma": limits}, reqs)
    cell.adjusted.add("gamma")
    _bound(cell, b.charger, "exact")
    median = statistics.median(b.charger.cost("anthropic", r)[2] for r in reqs)
    latency = ANTHROPIC_LATENCY["ttft_p50_ms"] + ANTHROPIC_LATENCY["per_token_ms"] * median
    cell.bound_s = cell.quota_s + latency / 1000.0
    return cell


def shift(b: Builder) -> Cell:
    """One provider whose tier halves for 10 s, its headers reporting it (see the module docstring)."""
    exact = _totals(b.charger, "openai", b.one, "exact")
    limits = _limits("alpha", exact, 20.0 - SHIFT["share"] * (SHIFT["until"] - SHIFT["from"]))
    half = {k: v // 2 for k, v in limits.items()}
    entry = _provider("alpha", limits, "token_bucket", "exact", "minute")
    entry["limit_changes"] = [{"at": SHIFT["from"], **half}, {"at": SHIFT["until"], **limits}]
    cell = Cell("shift: tier halves 5-15 s, headers report it", [entry], {"alpha": dict(limits)}, b.one)
    cell.shifts = [dict(SHIFT)]
    _bound(cell, b.charger, "exact")
    cell.quota_s += SHIFT["share"] * (SHIFT["until"] - SHIFT["from"])
    cell.bound_s += SHIFT["share"] * (SHIFT["until"] - SHIFT["from"])
    return cell


def colleague_at_latency(b: Builder) -> Cell:
    """The colleague row against a provider that answers in 0.5 s p50 (see the module docstring)."""
    colleague = {"share": 0.5, "from": 5.0, "until": 15.0}
    cell = b.neighbour("colleague: half the key, 5-15 s · 0.5 s latency", colleague, 20.0)
    cell.providers[0]["latency"] = {**LATENCY["alpha"], "ttft_p50_ms": COLLEAGUE_TTFT_MS}
    cell.bound_s += (COLLEAGUE_TTFT_MS - LATENCY["alpha"]["ttft_p50_ms"]) / 1000.0
    return cell


def rows(b: Builder) -> list[Cell]:
    """The issue-39 rows, in the matrix's order."""
    return [otpm_at_latency(b, 8.0), otpm_at_latency(b, 60.0), shift(b), colleague_at_latency(b)]
