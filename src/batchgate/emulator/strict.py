"""`refuse_unknown_fields`: whether an emulated provider answers a body field its wire does not
know with its 400, as strict providers (and Google's protobuf JSON) do — issue 41's check that no
field is dropped on the way. Each wire keeps its list of accepted fields beside its rules
(`gemini_api.ACCEPTED_FIELDS`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchgate.errors import ConfigError


def read_strict(m: Mapping[str, Any], source: str, key: str) -> bool:
    """A provider entry's `refuse_unknown_fields` (default false)."""
    value = m.get("refuse_unknown_fields", False)
    if not isinstance(value, bool):
        raise ConfigError(source, f"{key}.refuse_unknown_fields", "must be true or false")
    return value
