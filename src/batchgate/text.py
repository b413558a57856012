"""Small helpers for the words batchgate prints: counts with the right plural, a time of day."""

from __future__ import annotations

import time


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """`1 result`, `2 results`, `1 invalid line`, `3 failed items` (`plural_form` for irregular ones)."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {plural_form or noun + 's'}"


def clock_text(wall: float) -> str:
    """A wall time as the hour and minute of the local day, as a person reads it ("12:03")."""
    return time.strftime("%H:%M", time.localtime(wall))
