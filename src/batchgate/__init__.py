"""batchgate: large batches of LLM requests across providers, as fast as each quota allows.

`batchgate.Job` / `batchgate.JobResult` (from `batchgate.jobs.api`) are loaded on first use, so
`import batchgate` stays light."""

from __future__ import annotations

from typing import Any

__all__ = ["Job", "JobResult"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from batchgate.jobs import api

        return getattr(api, name)
    raise AttributeError(f"module 'batchgate' has no attribute {name!r}")
