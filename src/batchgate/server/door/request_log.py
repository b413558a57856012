"""What the server logs of a request it could not parse (issue 40): aiohttp logs each one at
ERROR with a traceback that quotes the offending bytes — an `Authorization` header with a NUL,
CR or \\x01 byte put the whole token in the log, and anyone could flood the log with them. The
server hands aiohttp this logger instead: one WARNING line per client address a minute
(`malformed_request`: the address, the error's kind and how many were not logged since), never
the error's text, the request's bytes or a traceback. aiohttp's other records pass to the
`aiohttp.server` logger without their exception text.
"""

from __future__ import annotations

import logging

from batchgate import logs
from batchgate.clock import Clock

EVERY_S = 60.0
MAX_CLIENTS = 10_000
log = logging.getLogger("batchgate.server")
_aiohttp = logging.getLogger("aiohttp.server")


class MalformedLog:
    """A stand-in for aiohttp's server logger (`web.Server(logger=...)`): what it is asked to
    log with an exception becomes at most one line a client a minute."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._last: dict[str, tuple[float, int]] = {}  # address -> (last logged, not logged since)

    def exception(self, message: str, *args: object, exc_info: object = None, **_: object) -> None:
        self._malformed(args, exc_info)

    def error(self, message: str, *args: object, exc_info: object = None, **_: object) -> None:
        self._malformed(args, exc_info)

    def warning(self, message: str, *args: object, **_: object) -> None:
        _aiohttp.warning(message, *args)

    def info(self, message: str, *args: object, **_: object) -> None:
        _aiohttp.info(message, *args)

    def debug(self, message: str, *args: object, **_: object) -> None:
        if _aiohttp.isEnabledFor(logging.DEBUG):
            _aiohttp.debug(message, *args)  # never exc_info: the bytes it quotes may be a token

    def isEnabledFor(self, level: int) -> bool:
        return _aiohttp.isEnabledFor(level)

    def _malformed(self, args: tuple[object, ...], exc_info: object) -> None:
        address = str(args[0]) if args else "?"
        kind = type(exc_info).__name__ if isinstance(exc_info, BaseException) else "error"
        now = self.clock.now()
        last, skipped = self._last.get(address, (-EVERY_S, 0))
        if now - last < EVERY_S:
            self._last[address] = (last, skipped + 1)
            return
        if len(self._last) >= MAX_CLIENTS:
            self._last = {a: v for a, v in self._last.items() if now - v[0] < EVERY_S}
        self._last[address] = (now, 0)
        logs.event(log, logging.WARNING, "malformed_request", client=address, kind=kind, not_logged=skipped)
