"""The best pace a smooth sender can reach on each sliding-window cell of the quota matrix.

    python bench/pace_ceiling.py [--quick] [--jitter-ms 0 5 10]

A sender that may not burst (it does not know the enforcement) and holds a one-second sliding
window to its limit sends each request the moment the last second has room for it — at best, as
this computes: the binding provider's requests, in order, each admitted when the window log (every
admission held `1 s + jitter`) plus its charge stays within one second's allowance, spaced at
least by the bucket's rate (the limit × 0.99). Whole requests leave part of every second unused
(16 requests of ~189 tokens fill 3,024 of a 3,167-token second), and each millisecond of jitter
allowance lengthens every window, so the pace the matrix reports (`quota_matrix.py`: the quota's
seconds for what succeeded ÷ the seconds from the first request to the last admission) has a
ceiling below 1.0 for any client that sends smoothly. A figures script, not a test: it prints the
ceiling per cell and jitter allowance; batchgate's figures are in docs/quota_matrix.md.
"""

from __future__ import annotations

import argparse
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from quota_cells import Builder, Cell, quota_seconds  # noqa: E402
from quota_matrix import SIZES  # noqa: E402

SAFETY = 0.99  # batchgate's pace: the limit × 0.99 spaces requests; the window log holds the limit
_CHARGED: dict[str, Callable[[tuple[int, int]], int]] = {
    "rpm": lambda c: 1,
    "tpm": lambda c: c[0] + c[1],
    "itpm": lambda c: c[0],
    "otpm": lambda c: c[1],
}


def smooth_ceiling(cell: Cell, jitter: float) -> float:
    """The pace of the best smooth schedule on `cell`'s binding provider and dimension."""
    name, key = cell.binding.split()
    provider = next(p for p in cell.providers if p["name"] == name)
    allowance = (provider.get("enforced") or provider["limits"])[key] / 60.0  # one second's
    charges = [_CHARGED[key](cell.costs[r.id]) for r in cell.requests if r.provider == name]
    log: deque[tuple[float, int]] = deque()  # (leaves at, charge)
    held, now, last = 0.0, 0.0, 0.0
    for charge in charges:
        while True:
            while log and log[0][0] <= now:
                held -= log.popleft()[1]
            if held + charge <= allowance or not log:
                break
            now = log[0][0]  # wait for the oldest admission to leave the window
        log.append((now + 1.0 + jitter, charge))
        held += charge
        last = now
        now += charge / (allowance * SAFETY)  # the bucket's spacing
    quota = quota_seconds(cell, None, credit=False)[0]
    return quota / last if last > 0 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the matrix's --quick sizes")
    parser.add_argument("--jitter-ms", type=float, nargs="+", default=[0.0, 5.0, 10.0])
    args = parser.parse_args()
    cells = [c for c in Builder(*SIZES[args.quick]).matrix() if "sliding_window" in c.name]
    head = " | ".join(f"jitter {j:g} ms" for j in args.jitter_ms)
    print(f"| cell | binds | {head} |")
    print("|---|---|" + "---|" * len(args.jitter_ms))
    for cell in cells:
        paces = " | ".join(f"{smooth_ceiling(cell, j / 1000.0):.3f}" for j in args.jitter_ms)
        print(f"| {cell.name} | {cell.binding} | {paces} |")


if __name__ == "__main__":
    main()
