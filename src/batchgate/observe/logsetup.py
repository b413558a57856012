"""Where batchgate's log events go: `--log-format text|json`, `--log-level`, `--log-file`.

Logging is off unless asked for (the live display owns the terminal). When asked, the `batchgate`
logger gets one handler — a file (appended, owner-only) or stderr — that writes each event on one
line: text (`ts LEVEL logger event key=value ...`) or a JSON object (`ts`, `level`, `logger`,
`event`, `msg`, then the event's fields: job, task (custom_id), attempt, provider, ...). Events never
carry a key or a prompt (`batchgate.logs`). Time stamps are `logging`'s own (UTC, milliseconds).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import orjson

from batchgate.errors import JobError
from batchgate.logs import ROOT

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
_RESERVED = ("ts", "level", "logger", "event", "msg")


def _ts(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _fields(record: logging.LogRecord) -> dict[str, object]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, dict) else {}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, event, msg, then the event's fields."""

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        out: dict[str, object] = {
            "ts": _ts(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", msg),
            "msg": msg,
        }
        for key, value in _fields(record).items():
            out.setdefault(key, value)  # a field never overwrites the envelope
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


class TextFormatter(logging.Formatter):
    """`ts LEVEL logger event key=value ...` (values with spaces or quotes as JSON strings)."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_ts(record.created), f"{record.levelname:<7}", record.name, record.getMessage()]
        parts += [f"{k}={_value(v)}" for k, v in _fields(record).items() if k not in _RESERVED]
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _value(value: object) -> str:
    if isinstance(value, str):
        return value if value and not any(c in value for c in ' "=\n') else orjson.dumps(value).decode()
    if value is None or isinstance(value, bool | int | float):
        return orjson.dumps(value).decode()
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


def _file_handler(path: Path) -> logging.Handler:
    try:  # created owner-only, then appended to
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        return logging.FileHandler(path, mode="a", encoding="utf-8")
    except OSError as exc:
        raise JobError(f"--log-file {path}: cannot write it ({exc.strerror or exc})") from None


@contextlib.contextmanager
def logging_to(level: str = "info", fmt: str = "text", path: Path | None = None) -> Iterator[None]:
    """Send the `batchgate` events at `level` and above, formatted as `fmt`, to `path` (None:
    stderr) while the block runs; then remove the handler and close it."""
    if level not in LEVELS or fmt not in FORMATS:
        raise JobError(f"log level must be one of {LEVELS} and format one of {FORMATS}")
    handler = _file_handler(path) if path is not None else logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    log = logging.getLogger(ROOT)
    saved = (log.level, log.propagate)
    log.addHandler(handler)
    log.setLevel(level.upper())
    log.propagate = False  # an embedding application's root handlers do not print them twice
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]
        handler.close()
