"""Checks a model's answer against the job's expectation (a regular expression or a JSON Schema).

An answer that fails is retried up to a limit, then marked invalid and listed for review — never
written as a plain success.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from batchgate.errors import ConfigError


class OutputCheck:
    def __init__(
        self, regex: str | None = None, schema: Mapping[str, Any] | None = None, *, source: str = "<config>"
    ) -> None:
        """A bad regex or schema raises `ConfigError` naming `source` and the `job.` key."""
        try:
            self._regex = re.compile(regex) if regex else None
        except re.error as exc:
            raise ConfigError(source, "job.validate_regex", f"invalid regular expression: {exc}") from None
        self._validator: Any = None
        if schema is not None:
            import jsonschema  # noqa: PLC0415 — start-up: loaded only for a job with an output schema

            as_dict = dict(schema)
            cls = jsonschema.validators.validator_for(as_dict)
            try:
                cls.check_schema(as_dict)
            except jsonschema.SchemaError as exc:
                where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
                reason = f"not a valid JSON Schema at {where}: {exc.message[:200]}"
                raise ConfigError(source, "job.validate_schema", reason) from None
            self._validator = cls(as_dict)

    @property
    def active(self) -> bool:
        return self._regex is not None or self._validator is not None

    def problem(self, text: str | None) -> str | None:
        """None when the answer is acceptable, else a one-line reason."""
        if text is None:
            return "the answer has no text"
        if self._regex is not None and not self._regex.fullmatch(text.strip()):
            return f"the answer does not match {self._regex.pattern!r}"
        if self._validator is not None:
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                return "the answer is not JSON"
            error = next(iter(self._validator.iter_errors(value)), None)
            if error is not None:
                path = "/".join(str(p) for p in error.absolute_path) or "(root)"
                return f"the answer fails the schema at {path}: {error.message[:200]}"
        return None
