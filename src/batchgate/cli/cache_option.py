"""`--cache LOCATION` and `--no-dedupe`, shared by `run`, `resume` and `retry`: the response cache
(issue 43). `--cache` wins over the config's `cache.store` (a SQLite file or a redis:// URL);
`--no-dedupe` sends identical lines of a job each on their own."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchgate.config import GatewayConfig

DEFAULT_CACHE = ".batchgate/cache.db"  # `batchgate cache` with neither --cache nor a config's cache.store


def add_cache_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cache",
        default=None,
        metavar="PATH|redis://...",
        help="reuse answers across runs (temperature 0 or seeded requests; cache.mode: always for more): "
        "a SQLite file or a redis:// URL (default: the config's cache.store, else no cache)",
    )
    p.add_argument(
        "--no-dedupe",
        action="store_true",
        help="send identical reusable lines of the job each on their own (default: once, answer copied)",
    )


def with_cache_options(config: GatewayConfig, args: argparse.Namespace) -> GatewayConfig:
    """The config with `--cache` and `--no-dedupe` applied to its `cache:` section."""
    cache = config.cache
    if getattr(args, "cache", None):
        cache = replace(cache, store=args.cache)
    if getattr(args, "no_dedupe", False):
        cache = replace(cache, dedupe=False)
    return config if cache is config.cache else replace(config, cache=cache)
