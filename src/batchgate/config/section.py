"""Reading one mapping of a YAML config: each value checked for its type and range, each unknown
key refused, and every failure a `ConfigError` naming the file and the key path."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NoReturn

from batchgate.errors import ConfigError


class Section:
    """A mapping being read, that knows its key path and refuses keys nobody asked for."""

    def __init__(self, data: object, source: str, path: str, allowed: frozenset[str]) -> None:
        self.source, self.path = source, path
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            self.fail("", f"must be a mapping, got {type_name(data)}")
        self.data: Mapping[str, object] = data  # every key checked against `allowed` below
        for key in data:
            if key not in allowed:
                name = key if isinstance(key, str) and key.strip() else repr(key)
                self.fail(name, f"unknown key (expected one of: {', '.join(sorted(allowed))})")

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def fail(self, name: str, reason: str) -> NoReturn:
        raise ConfigError(self.source, self.key(name) if name else self.path, reason)

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def raw(self, name: str) -> object:
        return self.data.get(name)

    def string(self, name: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self.data.get(name)
        if value is None:
            if required:
                self.fail(name, "is required")
            return default
        if not isinstance(value, str) or not value.strip():
            self.fail(name, f"must be a non-empty string, got {type_name(value)}")
        return value

    def number(
        self, name: str, default: float | None = None, *, minimum: float = 0.0, strict_min: bool = True
    ) -> float | None:
        value = self.data.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(name, f"must be a number, got {type_name(value)}")
        bad = value <= minimum if strict_min else value < minimum
        if bad or not math.isfinite(value):
            op = ">" if strict_min else ">="
            self.fail(name, f"must be a finite number {op} {minimum:g}, got {value!r}")
        return float(value)

    def integer(self, name: str, default: int | None = None, *, minimum: int = 1) -> int | None:
        value = self.data.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(name, f"must be an integer, got {type_name(value)}")
        if value < minimum:
            self.fail(name, f"must be >= {minimum}, got {value}")
        return value

    def section(self, name: str, allowed: frozenset[str]) -> Section:
        return Section(self.data.get(name), self.source, self.key(name), allowed)

    def items(self, name: str, *, required: bool = False) -> list[object]:
        value = self.data.get(name)
        if value is None:
            if required:
                self.fail(name, "is required")
            return []
        if not isinstance(value, list):
            self.fail(name, f"must be a list, got {type_name(value)}")
        if required and not value:
            self.fail(name, "must not be empty")
        return value


def type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__
