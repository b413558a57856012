"""batchgate's structured log events, through the standard `logging` module.

Every logger is under `batchgate` (`batchgate.job`, `batchgate.task`, `batchgate.provider`,
`batchgate.request`); an event is one record whose message is the event's name (`aimd_cut`) and
whose fields ride on the record (`record.fields`, a dict) for a formatter to render
(`batchgate.observe.logsetup`: text or one JSON object per line). `bind` puts fields — the job
id, the task's custom_id — into the current asyncio context, so every event logged from that task
(and the tasks it starts) carries them without threading them through every call.

Cheap when off: `event` returns after one cached `isEnabledFor`, before any field is merged or
formatted; callers on a per-request path test `enabled(...)` before even building their fields.
A field never holds an API key or a prompt: ids, provider names, counts, kinds, limits.

May import: nothing of batchgate (bottom layer).
"""

from __future__ import annotations

import logging
from contextvars import ContextVar

ROOT = "batchgate"
DEBUG, INFO, WARNING, ERROR = logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR

_NONE: dict[str, object] = {}  # never mutated: `bind` replaces the context's dict
_context: ContextVar[dict[str, object]] = ContextVar("batchgate_log_context")

# A library does not print by default: without this, Python's last-resort handler would write
# warnings to stderr, under the live display. The CLI adds real handlers when asked (--log-*).
logging.getLogger(ROOT).addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    """The logger `batchgate.<name>`."""
    return logging.getLogger(f"{ROOT}.{name}")


def enabled(log: logging.Logger, level: int) -> bool:
    """Whether `log` emits at `level` (cached by `logging`; the hot path's one test)."""
    return log.isEnabledFor(level)


def bind(**fields: object) -> None:
    """Add `fields` to every event logged from the current context (an asyncio task and the
    tasks it starts afterwards)."""
    _context.set({**_context.get(_NONE), **fields})


def bound() -> dict[str, object]:
    """The fields `bind` put into the current context."""
    return _context.get(_NONE)


def event(log: logging.Logger, level: int, name: str, /, **fields: object) -> None:
    """Log event `name` with `fields` (after the context's bound fields) at `level`."""
    if not log.isEnabledFor(level):
        return
    ctx = _context.get(_NONE)
    log.log(level, name, extra={"event": name, "fields": {**ctx, **fields} if ctx else fields})
