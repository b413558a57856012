"""Request fields that are batchgate's own, not the provider's: taken off a request before its
body is built (for every input shape, in the library and the CLI alike) and carried on `Result`.

A strict provider refuses unknown body fields, and a field sent away is a field lost: whatever is
listed in `OWN_FIELDS` never reaches the wire. A job task keeps its input line's metadata (the
fields that are not request fields) in its stored body under `TASK_METADATA`, so it is one of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TASK_METADATA = "batchgate_metadata"  # a task's metadata: {field: value}, written back on its OUT line
OWN_FIELDS: frozenset[str] = frozenset({"custom_id", TASK_METADATA})
# An OUT line's own keys (jobs/output/files.py); its other keys are the task's metadata.
OUT_LINE_KEYS = frozenset(
    {"id", "custom_id", "response", "error", "provider", "attempts", "latency_ms", "usage", "cached"}
)


def split_request(request: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """`(custom_id, body)`: the request without batchgate's own fields, and its custom_id
    (None when it has none, or when it is not a string)."""
    if not OWN_FIELDS.intersection(request):
        return None, request if isinstance(request, dict) else dict(request)
    custom_id = request.get("custom_id")
    body = {k: v for k, v in request.items() if k not in OWN_FIELDS}
    return (custom_id if isinstance(custom_id, str) else None), body


def wire_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body as it is sent: without batchgate's own fields."""
    return {k: v for k, v in body.items() if k not in OWN_FIELDS}


def task_metadata(body: Mapping[str, object]) -> dict[str, object]:
    """A task's metadata, as its input line gave it ({} when it had none)."""
    meta = body.get(TASK_METADATA)
    return dict(meta) if isinstance(meta, dict) else {}


def out_line_metadata(line: Mapping[str, object]) -> dict[str, object]:
    """The metadata an OUT line carries: its keys that are not an OUT line's own."""
    return {k: v for k, v in line.items() if k not in OUT_LINE_KEYS}
