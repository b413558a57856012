"""The long crash loop: `batchgate run` killed with SIGKILL many times at seeded random moments on
one big job, resumed after each, then checked — every custom_id exactly once in OUT, no succeeded
item sent again beyond what was in flight at a kill, the job store consistent. Prints its figures.

    python scripts/crash_loop.py [--kills 100] [--items 5000] [--seed 7]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# tests/, as pytest puts it on the path: the suites import each other's helpers
sys.path[:0] = [str(ROOT / "tests")]

from acceptance.harness import Cli, read_jsonl  # noqa: E402
from reliability.helpers import (  # noqa: E402
    emu_provider,
    emu_totals,
    gw_provider,
    start_emulator,
    write_config,
    write_input,
)
from reliability.test_crash import crash_loop  # noqa: E402


def run(kills: int, items: int, seed: int, concurrency: int = 16, latency_ms: float = 80.0) -> dict[str, int]:
    """One crash loop in a fresh directory; returns its figures (asserting the invariants)."""
    emu = start_emulator(
        [
            emu_provider("alpha", latency_ms=latency_ms),
            emu_provider("gamma", "anthropic", latency_ms=latency_ms),
        ]
    )
    try:
        with tempfile.TemporaryDirectory(prefix="bg-crash-") as tmp:
            work = Path(tmp)
            cli = Cli(cwd=work, store=work / "store" / "jobs.db")
            src = write_input(work / "in.jsonl", items)
            cfg = write_config(
                work / "gw.yaml",
                [gw_provider(emu, "alpha"), gw_provider(emu, "gamma", "anthropic")],
                concurrency=concurrency,
            )
            out = work / "out.jsonl"
            args = ["run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "quiet"]
            try:
                figures = crash_loop(cli, emu, args, kills=kills, seed=seed)
            finally:
                cli.stop_all()
            ids = [row["custom_id"] for row in read_jsonl(out)] if out.exists() else []
            totals = emu_totals(emu)
            status = cli.status()
            figures.update(
                items=items,
                written=len(ids),
                lost=items - len(set(ids) & {f"item-{i:05d}" for i in range(items)}),
                repeated_in_out=len(ids) - len(set(ids)),
                resent_after_success=totals["duplicates"],
                resend_bound=concurrency * figures["kills"],
                provider_answers=totals["completed"],
                store_total=status["total"],
                store_done=status["succeeded"] + status["failed"],
                store_pending=status["pending"],
            )
            return figures
    finally:
        emu.stop()


def violations(figures: dict[str, int]) -> list[str]:
    """The invariants a crash loop must keep, as readable failures (empty: all kept)."""
    found = []
    if figures["lost"]:
        found.append(f"{figures['lost']} items missing from OUT")
    if figures["repeated_in_out"]:
        found.append(f"{figures['repeated_in_out']} custom_ids written more than once")
    if figures["resent_after_success"] > figures["resend_bound"]:
        found.append("answered prompts were sent again beyond what was in flight at the kills")
    if figures["store_done"] + figures["store_pending"] != figures["store_total"]:
        found.append(
            f"the job store accounts for {figures['store_done'] + figures['store_pending']} "
            f"of {figures['store_total']} tasks"
        )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    started = time.monotonic()
    figures = run(args.kills, args.items, args.seed)
    print(f"crash loop: {args.kills} kills planned on one job of {args.items} items (seed {args.seed})")
    for key, value in figures.items():
        print(f"  {key:<22} {value}")
    print(f"  {'elapsed_s':<22} {time.monotonic() - started:.1f}")
    broken = violations(figures)
    for problem in broken:
        print(f"  VIOLATION: {problem}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
