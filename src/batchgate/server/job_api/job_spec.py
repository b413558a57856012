"""A native job's options as `POST /v1/jobs` gives them: parsed and checked field by field, every
refusal a 400 (a wrong type or shape) or a 422 (a well-formed value that cannot be used) naming
the field. The spec is kept beside the job's batch record (`job_table`) and applied to its run."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import orjson

from batchgate.errors import ServiceRequestError

PRIORITIES = ("high", "normal", "low")
MODES = ("online", "batch-api", "auto")
MAX_METADATA_KEYS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
MAX_NAME = 256
MAX_URL = 2048
MAX_INLINE = 10_000
MAX_TIME = 7_258_118_400.0  # 2200-01-01T00:00:00Z
_URL = re.compile(r"^https?://[^\s/?#]+[^\s]*$", re.IGNORECASE)
FIELDS = frozenset(
    {"input_file_id", "requests", "name", "priority", "not_before", "deadline", "callback_url",
     "metadata", "budget", "mode", "validate"}
)  # fmt: skip


@dataclass(slots=True)
class JobSpec:
    """What a job was asked to be; `not_before` and `deadline` are unix seconds."""

    name: str | None = None
    priority: str = "normal"
    not_before: float | None = None
    deadline: float | None = None
    callback_url: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    budget_usd: float | None = None
    mode: str | None = None
    validate_regex: str | None = None
    validate_schema: dict[str, Any] | None = None

    def to_blob(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def of_blob(cls, blob: bytes | str) -> JobSpec:
        return cls(**orjson.loads(blob))


def bad(field_name: str, message: str, status: int = 400) -> ServiceRequestError:
    return ServiceRequestError(status, f"'{field_name}': {message}", param=field_name, code="invalid_value")


def parse_spec(body: dict[str, Any], now: float) -> JobSpec:
    """The spec of a create request (the input, `input_file_id` or `requests`, is read apart)."""
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise bad(unknown[0], "unknown field")
    return JobSpec(
        name=_text(body, "name", MAX_NAME),
        priority=_choice(body, "priority", PRIORITIES) or "normal",
        not_before=_time(body, "not_before"),
        deadline=_deadline(body.get("deadline"), now),
        callback_url=_callback(body.get("callback_url")),
        metadata=metadata(body.get("metadata")),
        budget_usd=_budget(body.get("budget")),
        mode=_choice(body, "mode", MODES),
        **_validate(body.get("validate")),
    )


def _text(body: dict[str, Any], name: str, limit: int) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise bad(name, f"expected a non-empty string of at most {limit} characters")
    return value


def _choice(body: dict[str, Any], name: str, allowed: tuple[str, ...]) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if value not in allowed:
        raise bad(name, f"expected one of {', '.join(allowed)}; got {value!r}")
    return str(value)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def parse_time(value: object, name: str) -> float:
    """Unix seconds (a number) or an RFC 3339 date-time with its offset, from 1970 to 2200 (a
    date-time every reader can show: `9999-12-31T23:59:59-14:00` is past year 9999 in UTC)."""
    number = _number(value)
    if number is None:
        if not isinstance(value, str):
            raise bad(name, "expected unix seconds or an RFC 3339 date-time")
        number = _rfc3339(value, name)
    if not 0 <= number < MAX_TIME:
        raise bad(name, "expected a time from 1970-01-01T00:00:00Z to before 2200-01-01T00:00:00Z")
    return number


def _rfc3339(value: str, name: str) -> float:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise bad(name, f"not an RFC 3339 date-time: {value[:64]!r}") from None
    if parsed.tzinfo is None:
        raise bad(name, "the date-time needs an offset (such as Z or +02:00)")
    try:
        return parsed.timestamp()
    except (OverflowError, ValueError):
        return -1.0  # out of any range: refused by the caller


def _time(body: dict[str, Any], name: str) -> float | None:
    value = body.get(name)
    return None if value is None else parse_time(value, name)


def _deadline(value: object, now: float) -> float | None:
    """`{"hours": h}` from now, or a time (unix seconds or RFC 3339)."""
    if value is None:
        return None
    if isinstance(value, dict):
        hours = _number(value.get("hours"))
        if set(value) != {"hours"} or hours is None or not 0 < hours <= 24 * 365:
            raise bad("deadline", 'expected {"hours": h} with 0 < h <= 8760, or a time')
        return now + hours * 3600
    at = parse_time(value, "deadline")
    if at <= now:
        raise bad("deadline", "the deadline has passed", 422)
    return at


def _callback(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_URL or not _URL.match(value):
        raise bad("callback_url", f"expected an http(s) URL of at most {MAX_URL} characters")
    return value


def metadata(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > MAX_METADATA_KEYS:
        raise bad("metadata", f"expected an object of at most {MAX_METADATA_KEYS} string values")
    for key, item in value.items():
        if (
            not 0 < len(key) <= MAX_METADATA_KEY
            or not isinstance(item, str)
            or len(item) > MAX_METADATA_VALUE
        ):
            raise bad(
                "metadata",
                f"keys of 1 to {MAX_METADATA_KEY} characters, string values of at most {MAX_METADATA_VALUE}",
            )
    return dict(value)


def _budget(value: object) -> float | None:
    if value is None:
        return None
    number = _number(value)
    if number is None or not 0 < number <= 1e9:
        raise bad("budget", "expected a cost in USD above 0")
    return number


def _validate(value: object) -> dict[str, Any]:
    """`{"regex": ..., "schema": {...}}`: the output check each answer must pass, compiled here as
    the job's run compiles it (nothing fetched, patterns on the engine with a time limit)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not value or set(value) - {"regex", "schema"}:
        raise bad("validate", 'expected an object with "regex" and/or "schema"')
    regex, schema = value.get("regex"), value.get("schema")
    if regex is not None:
        if not isinstance(regex, str) or not regex:
            raise bad("validate.regex", "expected a non-empty regular expression")
        from batchgate.jobs.io import safe_regex  # noqa: PLC0415 — start-up: only for a job with a regex

        try:
            safe_regex.compile_pattern(regex)
        except (ValueError, TypeError) as exc:
            raise bad("validate.regex", f"not a regular expression ({exc})", 422) from None
    if schema is not None:
        if not isinstance(schema, dict):
            raise bad("validate.schema", "expected a JSON Schema object")
        _compile_schema(schema)
    return {"validate_regex": regex, "validate_schema": schema}


def _compile_schema(schema: dict[str, Any]) -> None:
    from batchgate.jobs.io import schema_check  # noqa: PLC0415 — start-up: only for a job with a schema

    try:
        schema_check.compile_schema(schema)
    except schema_check.SchemaInvalid as exc:
        raise bad("validate", str(exc), exc.status) from None
    except schema_check.SchemaRefused as exc:
        raise bad("validate.schema", str(exc), exc.status) from None
    except Exception as exc:  # a schema the validator library cannot even read: said by kind only
        raise bad("validate.schema", f"not a usable JSON Schema ({type(exc).__name__})", 422) from None
