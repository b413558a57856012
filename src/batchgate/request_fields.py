"""Request fields that are batchgate's own, not the provider's: taken off a request before its
body is built (for every input shape, in the library and the CLI alike) and carried on `Result`.

A strict provider refuses unknown body fields, and a field sent away is a field lost: whatever is
listed in `OWN_FIELDS` never reaches the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OWN_FIELDS: frozenset[str] = frozenset({"custom_id"})


def split_request(request: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """`(custom_id, body)`: the request without batchgate's own fields, and its custom_id
    (None when it has none, or when it is not a string)."""
    if not OWN_FIELDS.intersection(request):
        return None, request if isinstance(request, dict) else dict(request)
    custom_id = request.get("custom_id")
    body = {k: v for k, v in request.items() if k not in OWN_FIELDS}
    return (custom_id if isinstance(custom_id, str) else None), body
