"""Reading a gateway config: a YAML file (or a mapping) checked into `schema.GatewayConfig`, once, at
the edge. Every error names the file, the key path and the reason."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from batchgate.config.parse import parse_gateway_config
from batchgate.config.schema import GatewayConfig
from batchgate.errors import ConfigError


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> GatewayConfig:
    """Read and validate a gateway config file; the only place that reads API key variables."""
    import yaml  # noqa: PLC0415 — start-up: a YAML parser only to read a file (not for `--help`)

    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(source, "", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(source, "", f"cannot read: {exc.__class__.__name__}") from None
    try:
        data = _parse_yaml(text)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow; no mark, a position
        line = text.count("\n", 0, exc.position) + 1
        raise ConfigError(
            source, f"line {line}", f"invalid YAML: character {exc.character!r} not allowed"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(source, where, "invalid YAML") from None
    return config_from_dict(data, source=source, environ=os.environ if environ is None else environ)


def _parse_yaml(text: str) -> object:
    """The document, parsed by libyaml where PyYAML has it (~10x faster: start-up); an error is
    found again by the pure-Python parser, whose messages name the line and the character. Not
    checked yet: `parse_gateway_config` narrows it."""
    import yaml  # noqa: PLC0415 — start-up: already imported by `load_config`, its only caller

    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            return yaml.load(text, Loader=fast)  # CSafeLoader: the safe loader, in C
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


def config_from_dict(
    data: object, *, source: str = "<dict>", environ: Mapping[str, str] | None = None
) -> GatewayConfig:
    return parse_gateway_config(data, source, environ if environ is not None else {})
