"""A native job's options as `POST /v1/jobs` gives them: the API's fields (its input,
`input_file_id` or `requests`, is read apart) read by the one job-spec parser every front door
uses (`config.job_spec`), its output check compiled as the run compiles it; every refusal a 400
(a wrong type or shape) or a 422 (a well-formed value that cannot be used) naming the field. The
spec is kept beside the job's batch record (`job_table`) and by the job in the store."""

from __future__ import annotations

from collections.abc import Mapping

from batchgate.config.job_spec import JobSpec, parse_job_spec
from batchgate.errors import JobSpecError
from batchgate.jobs.checks.output_check import check_compiles
from batchgate.server.door.job_fields import refused

MAX_INLINE = 10_000
INPUT_FIELDS = frozenset({"input_file_id", "requests"})
# what a tenant may set (no `callback_secret_env`: the server signs with the key's own secret)
FIELDS = frozenset(
    {"name", "priority", "not_before", "deadline", "callback_url", "metadata", "budget", "mode", "validate"}
)


def parse_spec(body: Mapping[str, object], now: float) -> JobSpec:
    """The spec of a create request (a deadline in hours counted from `now`)."""
    options = {k: v for k, v in body.items() if k not in INPUT_FIELDS}
    try:
        return parse_job_spec(options, now, accepted=FIELDS, check_output=check_compiles)
    except JobSpecError as exc:
        raise refused(exc) from None
