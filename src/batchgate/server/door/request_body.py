"""A request's JSON body, which every create route reads the same way: a JSON object, or a 400
naming what is wrong (in the route's own error shape, through `refuse`), read within the route's
body bound (`body_limits.read`)."""

from __future__ import annotations

from collections.abc import Callable

import orjson
from aiohttp import web

from batchgate.errors import ServiceRequestError
from batchgate.server.door import body_limits


def _refused(message: str) -> ServiceRequestError:
    return ServiceRequestError(400, message)


async def json_object(
    request: web.Request, refuse: Callable[[str], ServiceRequestError] = _refused
) -> dict[str, object]:
    """The body as a mapping, its values for the route to check; `refuse(message)` is raised when
    it is not JSON or not an object."""
    try:
        body = orjson.loads(await body_limits.read(request))
    except orjson.JSONDecodeError:
        raise refuse("The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise refuse("The request body must be a JSON object.")
    return body
