"""What a request's URL may carry, checked at the door: a path and query values that are UTF-8
text (an escape such as `%FF` decodes to a lone surrogate no store can hold), and the integer
query values (`limit`) spelled in ASCII digits only — `²` or `٣` are digits to Python's `int`,
not to an API."""

from __future__ import annotations

from aiohttp import web

from batchgate.errors import ServiceRequestError

_MAX_DIGITS = 9


def check_text(request: web.Request) -> None:
    """A 400 naming the query parameter (or the path) that is not UTF-8 text."""
    for name, value in request.query.items():
        if not _utf8(name) or not _utf8(value):
            shown = name if _utf8(name) else "query"
            raise ServiceRequestError(400, f"'{shown}': not UTF-8 text", param=shown, code="invalid_value")
    if not _utf8(request.path):
        raise ServiceRequestError(400, "the path is not UTF-8 text", code="invalid_value")


def query_int(text: str | None, name: str, default: int, top: int) -> int:
    """`text` as an integer from 1 to `top` (ASCII digits only), `default` when absent."""
    if text is None:
        return default
    value = int(text) if text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS else 0
    if not 1 <= value <= top:
        raise ServiceRequestError(
            400,
            f"'{name}': expected an integer from 1 to {top}; got {text[:32]!r}",
            param=name,
            code="invalid_value",
        )
    return value


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
