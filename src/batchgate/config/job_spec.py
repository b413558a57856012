"""A job's own options — name, priority, scheduled start, deadline, callback, metadata, budget,
mode, output validation, retry rounds — as one value (`JobSpec`) read by one parser
(`parse_job_spec`) with one set of limits and one error text, whichever door the job came in by:
the YAML `job:` section, `batchgate run` flags, `batchgate.Job(...)`, `batchgate submit` and the
server's jobs API. Each door turns a `JobSpecError` (field, reason, status) into its own error kind
(`ConfigError` naming `job.FIELD`, a CLI usage line naming the flag, a 400/422 naming the field).

Times are unix seconds or RFC 3339 date-times with an offset, from 1970 to before 2200 (a tenant's
`9999-12-31T23:59:59-14:00` is refused, not shown as a date no reader can print). A deadline is
a time, or `{"hours": h}` (`deadline_hours: h`): h hours after the job was created."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any, TypedDict
from urllib.parse import urlsplit

import orjson

from batchgate.errors import JobSpecError

PRIORITIES = ("high", "normal", "low")
PRIORITY_RANK = {"high": 0, "normal": 1, "low": 2}  # a smaller rank starts first
MODES = ("online", "batch-api", "auto")
MAX_METADATA_KEYS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
MAX_NAME = 256
MAX_URL = 2048
MAX_HOURS = 24 * 365
MAX_RETRY_ROUNDS = 100
MAX_TIME = 7_258_118_400.0  # 2200-01-01T00:00:00Z
_URL = re.compile(r"^https?://[^\s/?#]+[^\s]*$", re.IGNORECASE)
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class ShownSpec(TypedDict):
    """What `JobSpec.shown` gives: the spec as `status`, `jobs` and the report show it."""

    name: str | None
    priority: str
    metadata: dict[str, str]
    not_before: str | None
    deadline: str | None
    deadline_hours: float | None
    mode: str | None
    callback_host: str | None
    retry_failed: int


# Every field the parser reads; a door passes the subset it accepts (`fields=`).
FIELDS = frozenset(
    {"name", "priority", "not_before", "deadline", "deadline_hours", "callback_url",
     "callback_secret_env", "metadata", "budget", "mode", "validate", "validate_regex",
     "validate_schema", "retry_failed"}
)  # fmt: skip
OutputCheck = Callable[[str | None, Mapping[str, object] | None], None]  # raises JobSpecError


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a job was asked to be; `not_before` and `deadline` are unix seconds, `deadline_hours`
    counts from the job's creation. None (and "normal", 0, {}) means "not given"."""

    name: str | None = None
    priority: str = "normal"
    not_before: float | None = None
    deadline: float | None = None
    deadline_hours: float | None = None
    callback_url: str | None = None
    callback_secret_env: str | None = None  # the variable holding the `whsec_…` signing secret
    metadata: Mapping[str, str] = field(default_factory=dict)
    budget_usd: float | None = None
    mode: str | None = None
    validate_regex: str | None = None
    validate_schema: Mapping[str, object] | None = None
    retry_failed: int = 0  # rounds of failed tasks run again

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def to_blob(self) -> bytes:
        return orjson.dumps(self.to_dict())

    @classmethod
    def of_dict(cls, data: Mapping[str, Any]) -> JobSpec:
        """A stored spec (fields a newer version wrote are ignored, missing ones default)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known and v is not None})

    @classmethod
    def of_blob(cls, blob: bytes | str) -> JobSpec:
        return cls.of_dict(orjson.loads(blob))

    def given(self) -> dict[str, Any]:
        """The fields set to something other than their default."""
        default = JobSpec()
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: v for k, v in values.items() if v != getattr(default, k)}

    def over(self, base: JobSpec) -> JobSpec:
        """`base` with this spec's given fields in place of its own (a deadline in either form
        replaces the other)."""
        given = self.given()
        if "deadline" in given or "deadline_hours" in given:
            given = {"deadline": None, "deadline_hours": None, **given}
        return replace(base, **given)

    def shown(self) -> ShownSpec:
        """What `status`, `jobs` and the report show of it: its name, priority, metadata and times
        (RFC 3339), the callback by its host only (a URL may carry a token)."""
        host = urlsplit(self.callback_url).hostname if self.callback_url else None
        return {
            "name": self.name,
            "priority": self.priority,
            "metadata": dict(self.metadata),
            "not_before": rfc3339(self.not_before),
            "deadline": rfc3339(self.deadline),
            "deadline_hours": self.deadline_hours,
            "mode": self.mode,
            "callback_host": host,
            "retry_failed": self.retry_failed,
        }

    def deadline_at(self, created_at: float) -> float | None:
        """The deadline as unix seconds, for a job created at `created_at`."""
        if self.deadline is not None:
            return self.deadline
        return None if self.deadline_hours is None else created_at + self.deadline_hours * 3600

    def hours_after(self, created_at: float) -> float | None:
        """The deadline as hours after the job's creation (at least one second)."""
        at = self.deadline_at(created_at)
        return None if at is None else max(1 / 3600, (at - created_at) / 3600)


def parse_job_spec(
    data: Mapping[str, object],
    now: float | None = None,
    *,
    accepted: frozenset[str] = FIELDS,
    check_output: OutputCheck | None = None,
) -> JobSpec:
    """The spec in `data` (None values are "not given"). With `now`, a deadline in hours becomes
    a time and a passed deadline is refused; `check_output` compiles a regex/schema as the run will."""
    unknown = sorted(k for k in data if k not in accepted)
    if unknown:
        raise JobSpecError(str(unknown[0]), "unknown field")
    regex, schema = _validate(data)
    if check_output is not None and (regex is not None or schema is not None):
        check_output(regex, schema)
    deadline, hours = _deadline(data.get("deadline"), now)
    if data.get("deadline_hours") is not None:
        if deadline is not None or hours is not None:
            raise JobSpecError("deadline_hours", "give deadline or deadline_hours, not both")
        hours = _hours(data["deadline_hours"], "deadline_hours")
    if now is not None and hours is not None:
        deadline, hours = now + hours * 3600, None
    return JobSpec(
        name=_text(data, "name", MAX_NAME),
        priority=_choice(data, "priority", PRIORITIES) or "normal",
        not_before=_time(data, "not_before"),
        deadline=deadline,
        deadline_hours=hours,
        callback_url=callback_url(data.get("callback_url")),
        callback_secret_env=_env_name(data.get("callback_secret_env")),
        metadata=metadata(data.get("metadata")),
        budget_usd=_budget(data.get("budget")),
        mode=_choice(data, "mode", MODES),
        validate_regex=regex,
        validate_schema=schema,
        retry_failed=_rounds(data.get("retry_failed")),
    )


def spec_line(shown: Mapping[str, object]) -> str:
    """` "name" (high; team=search, run=7)`: a job's name, a priority other than normal and its
    metadata, as `JobSpec.shown` gives them ("" when none is set)."""
    name = f' "{shown["name"]}"' if shown.get("name") else ""
    marks = [str(shown["priority"])] if shown.get("priority") not in (None, "normal") else []
    metadata = shown.get("metadata")
    pairs = ", ".join(f"{k}={v}" for k, v in sorted(metadata.items())) if isinstance(metadata, dict) else ""
    detail = "; ".join(marks + ([pairs] if pairs else []))
    return name + (f" ({detail})" if detail else "")


def rfc3339(at: float | None) -> str | None:
    """Unix seconds as an RFC 3339 date-time in UTC (`Z`)."""
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _text(data: Mapping[str, object], name: str, limit: int) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise JobSpecError(name, f"expected a non-empty string of at most {limit} characters")
    return value


def _choice(data: Mapping[str, object], name: str, allowed: tuple[str, ...]) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if value not in allowed:
        raise JobSpecError(name, f"expected one of {', '.join(allowed)}; got {value!r}")
    return str(value)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def parse_time(value: object, name: str) -> float:
    """Unix seconds (a number) or an RFC 3339 date-time with its offset, from 1970 to 2200."""
    number = _number(value)
    if number is None:
        if not isinstance(value, str):
            raise JobSpecError(name, "expected unix seconds or an RFC 3339 date-time")
        number = _rfc3339(value, name)
    if not 0 <= number < MAX_TIME:
        raise JobSpecError(name, "expected a time from 1970-01-01T00:00:00Z to before 2200-01-01T00:00:00Z")
    return number


def _rfc3339(value: str, name: str) -> float:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise JobSpecError(name, f"not an RFC 3339 date-time: {value[:64]!r}") from None
    if parsed.tzinfo is None:
        raise JobSpecError(name, "the date-time needs an offset (such as Z or +02:00)")
    try:
        return parsed.timestamp()
    except (OverflowError, ValueError):
        return -1.0  # out of any range: refused by the caller


def _time(data: Mapping[str, object], name: str) -> float | None:
    value = data.get(name)
    return None if value is None else parse_time(value, name)


def _hours(value: object, name: str) -> float:
    hours = _number(value)
    if hours is None or not 0 < hours <= MAX_HOURS:
        raise JobSpecError(name, f"expected a number of hours above 0 and at most {MAX_HOURS}")
    return hours


def _deadline(value: object, now: float | None) -> tuple[float | None, float | None]:
    """(a time, hours after creation): `{"hours": h}`, or a time (unix seconds or RFC 3339)."""
    if value is None:
        return None, None
    if isinstance(value, Mapping):
        if set(value) != {"hours"} or _number(value.get("hours")) is None:
            raise JobSpecError("deadline", f'expected {{"hours": h}} with 0 < h <= {MAX_HOURS}, or a time')
        return None, _hours(value["hours"], "deadline")
    at = parse_time(value, "deadline")
    if now is not None and at <= now:
        raise JobSpecError("deadline", "the deadline has passed", 422)
    return at, None


def callback_url(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_URL or not _URL.match(value):
        raise JobSpecError("callback_url", f"expected an http(s) URL of at most {MAX_URL} characters")
    return value


def _env_name(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _ENV.match(value):
        raise JobSpecError("callback_secret_env", "expected the name of an environment variable")
    return value


def metadata(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or len(value) > MAX_METADATA_KEYS:
        raise JobSpecError("metadata", f"expected an object of at most {MAX_METADATA_KEYS} string values")
    for key, item in value.items():
        if (
            not isinstance(key, str)
            or not 0 < len(key) <= MAX_METADATA_KEY
            or not isinstance(item, str)
            or len(item) > MAX_METADATA_VALUE
        ):
            raise JobSpecError(
                "metadata",
                f"keys of 1 to {MAX_METADATA_KEY} characters, string values of at most {MAX_METADATA_VALUE}",
            )
    return dict(value)


def _budget(value: object) -> float | None:
    if value is None:
        return None
    number = _number(value)
    if number is None or not 0 < number <= 1e9:
        raise JobSpecError("budget", "expected a cost in USD above 0")
    return number


def _rounds(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RETRY_ROUNDS:
        raise JobSpecError("retry_failed", f"expected a number of rounds from 0 to {MAX_RETRY_ROUNDS}")
    return value


def _validate(data: Mapping[str, object]) -> tuple[str | None, Mapping[str, object] | None]:
    """`validate: {"regex": ..., "schema": {...}}`, or the flat `validate_regex` / `validate_schema`."""
    value = data.get("validate")
    if value is not None:
        if not isinstance(value, Mapping) or not value or set(value) - {"regex", "schema"}:
            raise JobSpecError("validate", 'expected an object with "regex" and/or "schema"')
        if data.get("validate_regex") is not None or data.get("validate_schema") is not None:
            raise JobSpecError("validate", "give validate or validate_regex/validate_schema, not both")
        return _regex(value.get("regex"), "validate.regex"), _schema(value.get("schema"), "validate.schema")
    regex = _regex(data.get("validate_regex"), "validate_regex")
    return regex, _schema(data.get("validate_schema"), "validate_schema")


def _regex(value: object, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise JobSpecError(name, "expected a non-empty regular expression")
    return value


def _schema(value: object, name: str) -> Mapping[str, object] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise JobSpecError(name, "expected a JSON Schema object")
    return value
