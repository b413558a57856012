"""Reading `--config` in a command's handler: the config package (with the quota and policy value
objects its schema holds) is imported only then, never to build the parser for `--help`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchgate.config import GatewayConfig


def load_config(path: str | Path) -> GatewayConfig:
    """`batchgate.config.load_config`, imported when first called."""
    from batchgate.config import load_config as load  # noqa: PLC0415 — not for --help

    return load(path)
