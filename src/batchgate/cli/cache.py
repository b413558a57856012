"""`batchgate cache stats|clear|prune --older-than 30d`: look after the response cache (issue 43)
named by `--cache`, else the config's `cache.store`, else `.batchgate/cache.db`."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from batchgate.cli.cache_option import DEFAULT_CACHE

_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_age(text: str) -> float:
    """`30d`, `12h`, `90m`, `45s` -> seconds."""
    match = _AGE.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"expected an age like 30d, 12h, 90m or 45s, got {text!r}")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cache = sub.add_parser("cache", help="the response cache: its size, clear it, prune old answers")
    cache.add_argument("action", choices=("stats", "clear", "prune"))
    cache.add_argument(
        "--cache", default=None, metavar="PATH|redis://...", help="the cache (see `run --cache`)"
    )
    cache.add_argument("--config", type=Path, default=None, help="a config whose cache.store names the cache")
    cache.add_argument("--older-than", type=parse_age, default=None, metavar="AGE", help="prune: e.g. 30d")
    cache.set_defaults(handler=_cache)


def _cache(args: argparse.Namespace) -> int:
    import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio

    from batchgate.errors import ConfigError  # noqa: PLC0415 — as above

    if args.action == "prune" and args.older_than is None:
        raise ConfigError("batchgate cache prune", "--older-than", "is required (e.g. --older-than 30d)")
    return asyncio.run(_act(args, _location(args)))


def _location(args: argparse.Namespace) -> str:
    if args.cache:
        return str(args.cache)
    if args.config is not None:
        from batchgate.config import load_config  # noqa: PLC0415 — start-up: only with --config

        configured = load_config(args.config).cache.store
        if configured:
            return configured
    return DEFAULT_CACHE


async def _act(args: argparse.Namespace, location: str) -> int:
    from batchgate.cache.location import open_cache  # noqa: PLC0415 — start-up: only when it runs
    from batchgate.text import plural  # noqa: PLC0415 — as above

    if not location.startswith(("redis://", "rediss://")) and not Path(location).exists():
        print(f"no cache at {location}")
        return 0
    store = await open_cache(location, max_bytes=None)
    try:
        if args.action == "stats":
            s = await store.stats()
            bound = f" of {s.max_bytes / 2**20:,.0f} MB" if s.max_bytes else ""
            print(f"{s.location}: {plural(s.entries, 'answer')}, {s.bytes / 2**20:,.2f} MB{bound}")
        elif args.action == "clear":
            print(f"cleared {plural(await store.clear(), 'answer')} from {location}")
        else:
            dropped = await store.prune(args.older_than)
            days = args.older_than / 86400
            print(f"pruned {plural(dropped, 'answer')} older than {days:g} days from {location}")
    finally:
        await store.close()
    return 0
