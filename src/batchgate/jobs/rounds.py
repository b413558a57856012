"""Failed tasks run again, in rounds: `--retry-failed [N]` (on `run` and `resume`) and
`batchgate retry` re-queue a job's failed tasks and run them, at most N rounds (1 by default):
after a round that completed with tasks failed again, the next round re-queues those, until none
fail or N rounds have run. Each round's last run segment is marked, so the report counts the
rounds a job has had over all its runs (`retry_rounds`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from batchgate.jobs.io.report import RETRY_ROUND
from batchgate.jobs.store.protocol import JobStore
from batchgate.text import plural

__all__ = ["run_in_rounds"]


class _Outcome(Protocol):
    @property
    def status(self) -> str: ...


_O = TypeVar("_O", bound=_Outcome)
_G = TypeVar("_G")


async def run_in_rounds(
    store: JobStore,
    job_id: str,
    rounds: int,
    run: Callable[[], Awaitable[tuple[_O, _G]]],
    segments: list[dict[str, Any]],
    say: Callable[[str], None],
) -> tuple[_O, _G]:
    """Run the job (`run`), with up to `rounds` rounds of its failed tasks re-queued first."""
    done = 0
    if rounds:
        done = 1
        say(f"re-queued {plural(await store.requeue_failed(job_id), 'failed item')} of job {job_id}")
    outcome, extra = await run()
    _mark(segments, done)
    while done < rounds and outcome.status == "completed":
        requeued = await store.requeue_failed(job_id)
        if not requeued:
            break
        done += 1
        say(f"round {done} of {rounds}: re-queued {plural(requeued, 'item')} that failed again")
        outcome, extra = await run()
        _mark(segments, done)
    return outcome, extra


def _mark(segments: list[dict[str, Any]], round_no: int) -> None:
    if round_no and segments:
        segments[-1][RETRY_ROUND] = round_no

