"""A job option refused at the door: the one job-spec parser's `JobSpecError` (`config.job_spec`)
as the API's error — a 400 (a wrong type or shape) or a 422 (a well-formed value that cannot be
used) naming the field — and metadata (a batch's or a job's) checked within the spec's limits."""

from __future__ import annotations

from batchgate.config.job_spec import metadata
from batchgate.errors import JobSpecError, ServiceRequestError


def bad(field_name: str, message: str, status: int = 400) -> ServiceRequestError:
    return ServiceRequestError(status, f"'{field_name}': {message}", param=field_name, code="invalid_value")


def refused(exc: JobSpecError) -> ServiceRequestError:
    return bad(exc.field, exc.reason, exc.status)


def checked_metadata(value: object) -> dict[str, str]:
    """Metadata within a job's limits (OpenAI's), else a 400 naming `metadata`."""
    try:
        return metadata(value)
    except JobSpecError as exc:
        raise refused(exc) from None
