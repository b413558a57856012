"""The quota matrix's cells: which emulated providers each cell plays, its workload, and its bound.

A cell is one way of holding a quota — enforcement (token bucket, sliding or fixed window, all of
one second) × charge (exact tokens or characters ÷ 4) × header style (minute, window, none) — on
one provider or on three with a fan-out (every item to all three; one of them a local server that
answers a bare 429 past 16 requests in flight), plus two rows on today's default behaviour: faults
(5% 5xx, 1% requests that never answer) and a hidden limit (declared twice the enforced one).

Limits are derived from the workload so that each provider's quota binds at about the same time
(`target` seconds of exact-charge quota): tokens bind on alpha and gamma, requests on beta. The
prompts are prose long enough (~100 filler words) that characters ÷ 4 differs from the exact count
(about 1.2× on OpenAI's tokenizer, 0.85× on the emulated Anthropic one), so a client that reserves
exact counts under- or over-reserves, as against real providers.

The minimum seconds, per provider: for each limited dimension, what the requests are charged ÷
(enforced limit/60), minus one window (the allowance a provider admits at once); the cell's
`quota_s` is the largest (`quota_seconds` computes it for any subset, such as the requests a
system completed). `bound_s` adds the binding provider's median latency.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from workload import Charger, Request, make_requests

from batchgate.emulator.modes import text_chars

ENFORCEMENTS = ("token_bucket", "sliding_window", "fixed_window")
CHARGES = ("exact", "chars")
HEADERS = ("minute", "window", "none")
WINDOW_S = 1.0
FILLER_WORDS = 100
MAX_TOKENS = 8
OTPM_MAX_TOKENS = 16  # the Anthropic OTPM rows: ~6× the real answers
LATENCY = {
    "alpha": {"ttft_p50_ms": 300, "ttft_sigma": 0.4, "per_token_ms": 8},
    "beta": {"ttft_p50_ms": 450, "ttft_sigma": 0.4, "per_token_ms": 8},
    "gamma": {"ttft_p50_ms": 400, "ttft_sigma": 0.4, "per_token_ms": 8},
}
FAMILIES = {"alpha": "openai", "beta": "openai", "gamma": "anthropic"}
LOCAL_CAP = 16
DIMS = (("rpm", "requests"), ("tpm", "tokens"), ("itpm", "input_tokens"), ("otpm", "output_tokens"))


@dataclass(slots=True)
class Cell:
    name: str  # e.g. "1 · sliding_window · chars · none"
    providers: list[dict[str, Any]]  # emulator entries (enforced limits and modes)
    declared: dict[str, dict[str, int]]  # what clients are told, per provider
    requests: list[Request]
    timeout: float | None = None
    quota_s: float = 0.0
    bound_s: float = 0.0
    binding: str = ""
    bare_429: set[str] = field(default_factory=set)  # providers whose concurrency rejections are 429s
    adjusted: set[str] = field(default_factory=set)  # providers that charge the real output at the end
    neighbours: list[dict[str, float]] = field(default_factory=list)  # other traffic on the key
    shifts: list[dict[str, float]] = field(default_factory=list)  # the tier's share lost for a while
    costs: dict[str, tuple[int, int]] = field(default_factory=dict)  # id -> (input, output) charged


def _charge(charger: Charger, family: str, r: Request, charge: str) -> tuple[int, int, int]:
    """(input charged, output charged, reply tokens) for one request under `charge`."""
    inp, out, reply = charger.cost(family, r)
    if charge == "chars":
        body = r.openai_body("m") if family == "openai" else r.anthropic_body("m")
        inp = math.ceil(text_chars(body) / 4)
    return inp, out, reply


def _totals(charger: Charger, family: str, reqs: list[Request], charge: str) -> dict[str, float]:
    tot = {"requests": 0.0, "tokens": 0.0, "input_tokens": 0.0, "output_tokens": 0.0}
    replies = []
    for r in reqs:
        inp, out, reply = _charge(charger, family, r, charge)
        _add(tot, inp, out)
        replies.append(reply)
    tot["median_reply"] = statistics.median(replies) if replies else 0.0
    return tot


def _add(tot: dict[str, float], inp: float, out: float) -> None:
    tot["requests"] += 1
    tot["input_tokens"] += inp
    tot["output_tokens"] += out
    tot["tokens"] += inp + out


def _nice(x: float) -> int:
    """`x` rounded to two significant digits."""
    digits = max(0, int(math.log10(max(x, 1.0))) - 1)
    return int(round(x / 10**digits) * 10**digits)


def _limits(name: str, exact: dict[str, float], target: float) -> dict[str, int]:
    """Per-minute limits under which `name`'s workload takes about `target` s of quota."""

    def per_min(total: float, share: float) -> int:  # binds at target / share seconds
        return _nice(total / (target * share) * 60.0)

    if name == "alpha":
        return {"rpm": per_min(exact["requests"], 0.6), "tpm": per_min(exact["tokens"], 1.0)}
    if name == "beta":
        return {"rpm": per_min(exact["requests"], 1.0), "tpm": per_min(exact["tokens"], 0.4)}
    return {
        "rpm": per_min(exact["requests"], 0.6),
        "itpm": per_min(exact["input_tokens"], 1.0),
        "otpm": per_min(exact["output_tokens"], 0.6),
    }


def _provider(
    name: str, limits: dict[str, int], enforcement: str, charge: str, headers: str
) -> dict[str, Any]:
    seconds = "burst_seconds" if enforcement == "token_bucket" else "window_seconds"
    entry: dict[str, Any] = {
        "name": name,
        "family": FAMILIES[name],
        "limits": limits,
        "latency": LATENCY[name],
        "enforcement": {"kind": enforcement, seconds: WINDOW_S},
        "charge": "exact" if charge == "exact" else {"chars_per_token": 4},
        "headers": headers,
    }
    if name == "beta":  # a local server: a concurrency cap that answers a bare 429
        entry["concurrency"] = {"max": LOCAL_CAP, "overflow": "reject", "status": 429}
    return entry


def _enforced(p: dict[str, Any]) -> dict[str, int]:
    limits: dict[str, int] = p.get("enforced") or p["limits"]
    return limits


def quota_seconds(cell: Cell, ids: set[str] | None = None, *, credit: bool = True) -> tuple[float, str]:
    """The minimum seconds the quota needs for the requests `ids` (all if None), and what binds:
    their charge ÷ the enforced per-second limit, less the one window a provider admits at once
    (`credit`; without it, the seconds the per-minute rate alone needs)."""
    best = (0.0, "")
    for p in cell.providers:
        tot = {"requests": 0.0, "tokens": 0.0, "input_tokens": 0.0, "output_tokens": 0.0}
        for r in cell.requests:
            if r.provider == p["name"] and (ids is None or r.id in ids):
                _add(tot, *cell.costs[r.id])
        for key, dim in DIMS:
            limit = _enforced(p).get(key)
            if limit and tot[dim]:
                seconds = max(0.0, tot[dim] / (limit / 60.0) - (WINDOW_S if credit else 0.0))
                if seconds > best[0]:
                    best = (seconds, f"{p['name']} {key}")
    return best


def available_seconds(cell: Cell, start: float, end: float) -> float:
    """Seconds of the whole quota left to the client over [start, end] (emulator time): other
    traffic on the key takes its share while it is there, a tier that shrinks for a while its own."""
    taken = 0.0
    for n in cell.neighbours + cell.shifts:
        lo, hi = max(start, n.get("from", 0.0)), min(end, n.get("until", math.inf))
        taken += n["share"] * max(0.0, hi - lo)
    return (end - start) - taken


def _bound(cell: Cell, charger: Charger, charge: str) -> None:
    replies: dict[str, list[int]] = {}
    for r in cell.requests:
        inp, out, reply = _charge(charger, FAMILIES[r.provider], r, charge)
        cell.costs[r.id] = (inp, reply if r.provider in cell.adjusted else out)
        replies.setdefault(r.provider, []).append(reply)
    cell.quota_s, cell.binding = quota_seconds(cell)
    lat = LATENCY[cell.binding.split()[0]] if cell.binding else LATENCY["alpha"]
    median_reply = statistics.median(replies.get(cell.binding.split()[0], [0]) or [0])
    cell.bound_s = cell.quota_s + (lat["ttft_p50_ms"] + lat["per_token_ms"] * median_reply) / 1000


class Builder:
    """Builds every cell of the matrix at one size (`target` seconds of quota per cell)."""

    def __init__(self, target: float, items_one: int, items_three: int) -> None:
        self.target = target
        self.items_one = items_one
        self.charger = Charger()
        self.one = make_requests(items_one, ["alpha"], max_tokens=MAX_TOKENS, filler_words=FILLER_WORDS)
        self.three = make_requests(
            items_three, ["alpha", "beta", "gamma"], max_tokens=MAX_TOKENS, filler_words=FILLER_WORDS
        )
        self.limits: dict[tuple[int, str], dict[str, int]] = {}
        for n, reqs in ((1, self.one), (3, self.three)):
            for name in ("alpha",) if n == 1 else ("alpha", "beta", "gamma"):
                mine = [r for r in reqs if r.provider == name]
                exact = _totals(self.charger, FAMILIES[name], mine, "exact")
                self.limits[(n, name)] = _limits(name, exact, target)

    def cell(
        self, n: int, enforcement: str, charge: str, headers: str, *, label: str = "", **extra: Any
    ) -> Cell:
        names = ("alpha",) if n == 1 else ("alpha", "beta", "gamma")
        providers = []
        for name in names:
            entry = _provider(name, dict(self.limits[(n, name)]), enforcement, charge, headers)
            entry.update(extra.get(name, {}))
            entry.update(extra.get("all", {}))
            providers.append(entry)
        title = label or f"{n} · {enforcement} · {charge} · {headers}"
        declared = {p["name"]: dict(p["limits"]) for p in providers}
        cell = Cell(title, providers, declared, self.one if n == 1 else self.three)
        cell.bare_429 = {p["name"] for p in providers if p.get("concurrency", {}).get("status") == 429}
        _bound(cell, self.charger, charge)
        return cell

    def otpm(self, output_charge: str) -> Cell:
        """Anthropic with `max_tokens` 16, ~6× the real answers (2–3 tokens), and an OTPM that a
        client keeping `max_tokens` charged would hit at ~0.4 of the ITPM pace; the provider keeps
        that charge (`max_tokens`) or adjusts it to the real output at the end (`adjusted`, as
        Anthropic documents). ITPM binds for a client that settles as the provider does."""
        reqs = make_requests(self.items_one, ["gamma"], max_tokens=OTPM_MAX_TOKENS, filler_words=FILLER_WORDS)
        exact = _totals(self.charger, "anthropic", reqs, "exact")
        replies = sum(self.charger.cost("anthropic", r)[2] for r in reqs)
        per_min = lambda total, share: _nice(total / (self.target * share) * 60.0)  # noqa: E731
        limits = {
            "rpm": per_min(exact["requests"], 0.6),
            "itpm": per_min(exact["input_tokens"], 1.0),
            "otpm": per_min(replies, 0.4),
        }
        entry = _provider("gamma", limits, "token_bucket", "exact", "minute")
        entry["latency"] = {**LATENCY["gamma"], "ttft_p50_ms": 200}  # in flight: well within a second of OTPM
        entry["output_charge"] = output_charge
        cell = Cell(f"anthropic otpm · max_tokens 6× · {output_charge}", [entry], {"gamma": limits}, reqs)
        if output_charge == "adjusted":
            cell.adjusted.add("gamma")
        _bound(cell, self.charger, "exact")
        return cell

    def neighbour(self, label: str, neighbour: dict[str, float], target: float) -> Cell:
        """One provider (alpha) whose key other traffic shares (`neighbour`: the emulator's
        `neighbours` entry), sized to take `target` seconds of the whole quota."""
        exact = _totals(self.charger, "openai", self.one, "exact")
        limits = _limits("alpha", exact, target)
        entry = _provider("alpha", limits, "token_bucket", "exact", "minute")
        entry["neighbours"] = [neighbour]
        cell = Cell(label, [entry], {"alpha": dict(limits)}, self.one)
        cell.neighbours = [neighbour]
        _bound(cell, self.charger, "exact")
        return cell

    def matrix(self) -> list[Cell]:
        import quota_rows  # noqa: PLC0415 — its rows build on this module (issue 39)

        cells = [
            self.cell(n, e, c, h) for n in (1, 3) for e in ENFORCEMENTS for c in CHARGES for h in HEADERS
        ]
        faults = {"faults": {"server_error": 0.05, "hang": 0.01}}
        fault_cell = self.cell(
            3, "token_bucket", "exact", "minute", label="faults: 5% 5xx, 1% hangs", all=faults
        )
        fault_cell.timeout = 30.0  # the configured maximum every system gets
        cells.append(fault_cell)
        hidden = self.cell(1, "token_bucket", "exact", "minute", label="hidden limit: declared 2× enforced")
        for p in hidden.providers:
            p["enforced"] = p["limits"]
            p["limits"] = {k: 2 * v for k, v in p["enforced"].items()}  # what docs and headers claim
            hidden.declared[p["name"]] = dict(p["limits"])
        cells.append(hidden)
        cells += [self.otpm("adjusted"), self.otpm("max_tokens")]
        cells.append(
            self.neighbour("colleague: half the key, 5-15 s", {"share": 0.5, "from": 5, "until": 15}, 20.0)
        )
        cells.append(self.neighbour("neighbour: 30% of the key all along", {"share": 0.3}, 10.0))
        return cells + quota_rows.rows(self)
