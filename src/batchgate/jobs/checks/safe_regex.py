"""Regular expressions from a job's owner (a tenant of `batchgate serve`, or a config file), run
on the `regex` engine: it takes Python's syntax, releases the GIL while it matches, and stops a
match at `timeout=` — so a pattern such as `(a|aa)+$` that backtracks for ever on a long answer
ends as a `CheckTimeout`, never as a stalled process. A pattern is measured before it is
compiled (`pattern_size`): one that would expand past the bound is refused (`PatternTooLarge`),
never compiled nor cached. Every output check goes through here: the
answer check (`validate_regex`) and a JSON Schema's `pattern` and `patternProperties`.

`stopping` (a `threading.Event`, set by the waiter that gave the answer up) ends the check at the
next match instead of letting an abandoned check run on in its thread.
"""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Callable

import regex

from batchgate.jobs.checks.pattern_size import PatternTooLarge, check_size

MATCH_SECONDS = 2.0  # the most one match may take; an answer's whole check has the same limit

_STOP: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("check_stop", default=None)


__all__ = ["CheckTimeout", "PatternTooLarge", "compile_pattern", "fullmatch", "reset", "search", "stopping"]


class CheckTimeout(Exception):
    """The output check ran past its time limit on one answer."""


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """The compiled pattern; a `ValueError` saying why when the engine cannot take it
    (`PatternTooLarge` when it is past the bound of `pattern_size`)."""
    try:
        return _compiled(pattern)
    except regex.error as exc:
        raise ValueError(str(exc)) from None


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> regex.Pattern[str]:
    check_size(pattern)  # raises before the engine expands anything; lru_cache keeps no error
    return regex.compile(pattern)


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text` (JSON Schema's `pattern` semantics)."""
    return _run(_compiled(pattern).search, text)


def fullmatch(compiled: regex.Pattern[str], text: str) -> bool:
    return _run(compiled.fullmatch, text)


def _run(match: Callable[..., regex.Match[str] | None], text: str) -> bool:
    stop = _STOP.get()
    if stop is not None and stop.is_set():
        raise CheckTimeout
    try:
        return match(text, timeout=MATCH_SECONDS) is not None
    except TimeoutError:
        raise CheckTimeout from None


def stopping(event: threading.Event | None) -> contextvars.Token[threading.Event | None]:
    """Make `event` the current check's stop signal (until `_STOP.reset(token)`)."""
    return _STOP.set(event)


def reset(token: contextvars.Token[threading.Event | None]) -> None:
    _STOP.reset(token)
