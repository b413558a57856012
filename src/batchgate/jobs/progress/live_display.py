"""The live display on a terminal (rich): overall progress over the terminal's whole width,
elapsed time, rate and ETA, retries, 429s and errors by kind as they happen, the budget used
against its limit, and one row per provider with its state (ok, unreachable, circuit open,
paused), latency p50/p95, its quota in use and the requests waiting for it. It fits any width:
lines break between their `·` parts and the table drops its least useful columns, so nothing is
wrapped or cut mid-word (80 columns and 200 alike)."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from batchgate.jobs.progress.shapes import BudgetView, ProviderRow, Snapshot
from batchgate.text import plural

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live


def fmt_duration(seconds: float | None) -> str:
    """`42s`, `3m07s`, `1h02m`; `--` when unknown."""
    if seconds is None:
        return "--"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def eta_text(snap: Snapshot) -> str:
    """`3m07s`, with the step that binds a pipeline (`3m07s (summary)`), or `stalled 45s`."""
    if (stalled := snap.get("stalled_s")) is not None:
        return f"stalled {fmt_duration(stalled)}"
    step = snap.get("eta_step")
    return fmt_duration(snap["eta_s"]) + (f" ({step})" if step else "")


def total_text(snap: Snapshot) -> str:
    """The total, `1200+` while a pipeline's later steps are still being added."""
    return f"{snap['total']}+" if snap.get("total_growing") else str(snap["total"])


def budget_text(budget: BudgetView | None) -> str:
    """`budget $0.0213 of $1.00 (2%)`, with tokens where they are limited; "" without a budget."""
    if not budget:
        return ""
    parts = []
    if (max_usd := budget.get("max_usd")) is not None:
        share = budget["spent_usd"] / max_usd if max_usd else 1.0
        parts.append(f"${budget['spent_usd']:.4f} of ${max_usd:.2f} ({share:.0%})")
    if (max_tokens := budget.get("max_tokens")) is not None:
        share = budget["spent_tokens"] / max_tokens if max_tokens else 1.0
        parts.append(f"{budget['spent_tokens']} of {max_tokens} tokens ({share:.0%})")
    return "budget " + ", ".join(parts) if parts else ""


def quota_text(used: dict[str, float], learned: bool = False) -> str:
    """The fullest quota dimension, e.g. `tokens 73%` (`-` when the provider has no limits);
    `learned` (none declared: from its headers) says so, `learning` until its headers name one."""
    if not used:
        return "learning" if learned else "-"
    dim, share = max(used.items(), key=lambda kv: kv[1])
    return f"{dim.replace('_tokens', ' tok')} {share:.0%}" + (" learned" if learned else "")


def count_of(value: object) -> int:
    """An event's count field (0 when it has none)."""
    return value if isinstance(value, int) else 0


def kinds_text(kinds: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in kinds.items()) or "none"


def head_lines(snap: Snapshot) -> list[str]:
    """The lines above the bar (plain text; the rich sink styles them)."""
    waiting_for = ", ".join(f"{n} {k}" for n, k in sorted(snap.get("waiting_for", {}).items()))
    first = (
        f"{snap['done']}/{total_text(snap)} done  ok {snap['succeeded']}  failed {snap['failed']}  "
        f"pending {snap['pending']}  ·  elapsed {fmt_duration(snap['elapsed_s'])}  ·  "
        f"{snap['rate_per_s']:.1f}/s  ETA {eta_text(snap)}"
    )
    second = (
        f"in flight {snap['in_flight']}  ·  waiting for quota {snap.get('waiting', 0)}"
        + (f" (queued at {waiting_for})" if waiting_for else "")
        + f"  ·  retry backoff {snap.get('backing_off', 0)}"
        + f"  ·  {snap['tokens']} tokens  ·  ${snap['cost_usd']:.4f}"
    )
    third = (
        f"retries {snap.get('retries', 0)}  ·  429s {snap['rate_limited']}  ·  "
        f"errors: {kinds_text(snap.get('errors_by_kind', {}))}"
    )
    lines = [first, second, third]
    budget = budget_text(snap.get("budget"))
    if budget:
        lines.append(budget)
    lines += snap.get("unreachable", [])
    return lines


PROVIDER_COLUMNS = (
    "provider", "state", "requests", "ok", "errors", "retries", "429s", "in flight",
    "waiting", "quota used", "p50 ms", "p95 ms", "tokens", "cost $",
)  # fmt: skip


def state_text(p: ProviderRow) -> str:
    """Its state, with the circuit breaker's where that says more (`unreachable, circuit open`)."""
    state = str(p.get("state", "ok"))
    circuit = p.get("circuit", "closed")
    if circuit not in ("closed", "paused") and state not in ("circuit open", "probing", "taken out"):
        return f"{state}, circuit {circuit.replace('_', '-')}"
    return state


def provider_row(name: str, p: ProviderRow) -> list[str]:
    return [
        name,
        state_text(p),
        str(p["requests"]),
        str(p["ok"]),
        str(p["errors"]),
        str(p.get("retries", 0)),
        str(p["rate_limited"]),
        str(p["in_flight"]),
        str(p.get("waiting", 0)),
        quota_text(p.get("quota_used", {}), bool(p.get("quota_learned"))),
        f"{p['p50_ms']:.0f}",
        f"{p.get('p95_ms', 0.0):.0f}",
        str(p["tokens"]),
        f"{p.get('cost_usd', 0.0):.4f}",
    ]


_STATE_STYLE = {
    "ok": "green",
    "unreachable": "bold red",
    "taken out": "bold red",
    "circuit open": "red",
    "probing": "yellow",
    "waiting since": "bold yellow",
}


# The columns kept first when the terminal is narrow (the others go, least useful first).
COLUMN_PRIORITY = (
    "provider", "state", "requests", "ok", "errors", "429s", "in flight", "quota used", "cost $",
    "waiting", "p50 ms", "retries", "p95 ms", "tokens",
)  # fmt: skip
GAP = 2  # the space rich puts between two columns
SEP = "  ·  "


def fit_columns(rows: list[list[str]], width: int) -> list[int]:
    """The indexes of the `PROVIDER_COLUMNS` shown at `width`, in their order: taken by
    `COLUMN_PRIORITY` while each fits whole (provider and state always)."""
    need = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(PROVIDER_COLUMNS)]
    chosen: list[int] = []
    used = -GAP
    for name in COLUMN_PRIORITY:
        i = PROVIDER_COLUMNS.index(name)
        if used + GAP + need[i] <= width or name in ("provider", "state"):
            chosen.append(i)
            used += GAP + need[i]
    return sorted(chosen)


def fit_line(line: str, width: int) -> list[str]:
    """`line` as lines of at most `width`, broken between its `·` parts (a part wider than that,
    between words); a word is never cut."""
    out: list[str] = []
    current = ""
    for part in line.split(SEP):
        joined = f"{current}{SEP}{part}" if current else part
        if current and len(joined) > width:
            out.append(current)
            current = part
        else:
            current = joined
    out.append(current)
    wrap = textwrap.TextWrapper(width, break_long_words=False, break_on_hyphens=False)
    return [piece for chunk in out for piece in (wrap.wrap(chunk) if len(chunk) > width else [chunk])]


def render(snap: Snapshot, width: int) -> RenderableType:
    """The display for one snapshot at `width` columns."""
    from rich.console import Group  # noqa: PLC0415 — rich is the optional `cli` extra
    from rich.progress_bar import ProgressBar  # noqa: PLC0415 — rich is the optional `cli` extra
    from rich.table import Table  # noqa: PLC0415 — rich is the optional `cli` extra
    from rich.text import Text  # noqa: PLC0415 — rich is the optional `cli` extra

    head: list[Text] = []
    for i, line in enumerate(head_lines(snap)):
        style = "bold" if i == 0 else "bold red" if i >= 3 and "unreachable" in line else ""
        head += [Text(piece, style=style, no_wrap=True) for piece in fit_line(line, width)]
    bar = Table.grid(expand=True)  # a grid row of its own, so the table starts on the next line
    bar.add_row(ProgressBar(total=max(1, snap["total"]), completed=snap["done"], width=max(10, width - 2)))
    rows = [provider_row(name, p) for name, p in sorted(snap["providers"].items())]
    shown = fit_columns(rows, width)
    table = Table(box=None, pad_edge=False, header_style="dim", expand=True)
    for i in shown:
        col = PROVIDER_COLUMNS[i]
        table.add_column(col, justify="left" if col in ("provider", "state") else "right", no_wrap=True)
    for row in rows:
        cells: list[Text | str] = [row[i] for i in shown]
        state = row[1]
        kind = state.split(",")[0]  # "waiting since 12:03" is styled as "waiting since"
        cells[1] = Text(state, style=_STATE_STYLE.get(kind, _STATE_STYLE.get(kind.rsplit(" ", 1)[0], "")))
        table.add_row(*cells)
    return Group(*head, bar, table)


class RichSink:
    """A live display on stderr, redrawn on each update, as wide as the terminal. It starts (and
    rich is imported, ~30 ms) at the first update or the first event that cannot wait, not before
    the job's first request: the `started` line waits for it."""

    def __init__(self) -> None:
        self._console: Console | None = None
        self._live: Live | None = None
        self._waiting: list[tuple[str, dict[str, object]]] = []  # events heard before the display started

    def _start(self) -> Console:
        if self._console is not None:
            return self._console
        from rich.console import Console  # noqa: PLC0415 — rich is the optional `cli` extra
        from rich.live import Live  # noqa: PLC0415 — rich is the optional `cli` extra

        self._console = Console(stderr=True)
        self._live = Live(console=self._console, refresh_per_second=4, transient=False)
        self._live.start()
        waiting, self._waiting = self._waiting, []
        for name, fields in waiting:
            self._print(name, fields)
        return self._console

    def event(self, name: str, **fields: object) -> None:
        if name == "started" and self._live is None:
            self._waiting.append((name, fields))
            return
        self._print(name, fields)

    def _print(self, name: str, fields: dict[str, object]) -> None:
        console = self._start()
        if name == "started":
            console.print(
                f"[bold]batchgate[/] job {fields.get('job')}: {fields.get('pending')} to run, "
                f"{fields.get('done')} already done"
            )
        elif name == "stopping":
            in_flight = plural(count_of(fields.get("in_flight")), "in-flight request")
            console.print(
                f"[yellow]stopping[/]: {fields.get('reason')}; waiting up to {fields.get('grace_s')} s for "
                f"{in_flight} (press Ctrl-C again to stop at once)"
            )
        elif name == "provider_unreachable":
            console.print(
                f"[bold red]{fields.get('provider')} unreachable[/]: {fields.get('cause')} "
                f"({plural(count_of(fields.get('attempts')), 'attempt')} so far)"
            )

    def update(self, snap: Snapshot) -> None:
        console = self._start()
        assert self._live is not None
        self._live.update(render(snap, console.width))

    def close(self) -> None:
        if self._waiting:  # a run that ended before its first update still says what it was
            self._start()
        if self._live is not None:
            self._live.stop()
