"""Batch mode's two small interfaces to the run it belongs to, instead of callbacks.

`BatchEvents` is what a `BatchModeRunner` tells its run (outcomes already committed, answers the
output check refused, batch lifecycle events); `BatchDriver` implements it. `RunControl` is what the
driver asks of the run (send tasks live, stop, fail); `JobEngine` implements it. `NoEvents` hears
nothing (`batchgate cancel`, tests).
"""

from __future__ import annotations

from typing import Protocol

from batchgate.jobs.batch.outcomes import Rejected
from batchgate.jobs.store.protocol import TaskOutcome, TaskSpec


class BatchEvents(Protocol):
    def outcome(self, outcome: TaskOutcome) -> None:
        """A task's outcome, committed already (observe it; never commit it again)."""

    def rejected(self, refused: Rejected) -> None:
        """An answer the output check refused, heard before its task's outcome."""

    def event(self, name: str, fields: dict[str, object]) -> None:
        """`batch_submitted`, `batch_resumed` or `batch_ended`, with the batch's fields."""


class NoEvents:
    """Hears nothing."""

    def outcome(self, outcome: TaskOutcome) -> None:
        pass

    def rejected(self, refused: Rejected) -> None:
        pass

    def event(self, name: str, fields: dict[str, object]) -> None:
        pass


class RunControl(Protocol):
    def hand_live(self, specs: list[TaskSpec]) -> None:
        """Send these claimed tasks live (an empty list only wakes the dispatcher)."""

    def request_stop(self, reason: str) -> None:
        """Stop the run, for `reason`."""

    def fail(self, exc: BaseException) -> None:
        """End the run with an unexpected error."""
