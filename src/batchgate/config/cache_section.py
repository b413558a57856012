"""The config's `cache:` section (issue 43): where answers are kept across runs, when a request's
answer may be reused, and whether identical lines of one job are sent once.

    cache:
      store: .batchgate/cache.db     # a SQLite file, or redis://host:6379/0 (`run --cache` wins)
      mode: deterministic            # reuse answers of temperature 0 / seeded requests; `always`: n=1 too
      max_mb: 1024                   # a SQLite cache's bound (least recently used answers go first)
      dedupe: true                   # identical reusable lines of one job: sent once (`--no-dedupe`)
      namespace: "batchgate:cache:"  # Redis key prefix
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

from batchgate.config.section import Section, type_name

CACHE_KEYS = frozenset({"store", "mode", "max_mb", "dedupe", "namespace"})
MODES = ("deterministic", "always")


@dataclass(frozen=True, slots=True)
class CacheSettings:
    store: str | None = None  # None: no cache across runs (in-job dedupe still applies)
    mode: Literal["deterministic", "always"] = "deterministic"
    max_mb: int = 1024
    dedupe: bool = True
    namespace: str = "batchgate:cache:"


def read_cache(top: Section) -> CacheSettings:
    c = top.section("cache", CACHE_KEYS)
    mode = c.string("mode", "deterministic")
    if mode not in MODES:
        c.fail("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
    chosen = cast("Literal['deterministic', 'always']", mode)
    dedupe = c.raw("dedupe")
    if dedupe is not None and not isinstance(dedupe, bool):
        c.fail("dedupe", f"must be true or false, got {type_name(dedupe)}")
    return CacheSettings(
        store=c.string("store"),
        mode=chosen,
        max_mb=c.integer("max_mb", 1024) or 1024,
        dedupe=dedupe is not False,
        namespace=c.string("namespace", "batchgate:cache:") or "batchgate:cache:",
    )
